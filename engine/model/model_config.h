// ModelConfig: the resolved hyperparameters of a model directory's config.json, for every family
// mcserve runs (fla's linear_attn, gla, delta_net, gated_deltanet; mcserve's swla, titans, dla, lattice, hope; the published gam and armt).
// Defaults are fla's; legacy keys are accepted (specs/checkpoints.md §1.11). Immutable after load.
#pragma once

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "engine/mc/mc_config.h"
#include "engine/model/armt_config.h"
#include "engine/model/gam_config.h"
#include "engine/model/hope_config.h"

namespace mcserve::engine {

enum class ModelFamily { kLinearAttn, kGla, kDeltaNet, kGatedDeltaNet, kSwla, kTitans, kDla, kLattice, kHope, kGam, kArmt };

// Lattice's recurrence variant (config `lattice_variant`): decoding, encoding or similarity loss.
enum class LatticeVariant { kDec, kEnc, kSim };
// Where Lattice's initial slots come from (config `initial_state`).
enum class LatticeInit { kAuto, kLearned, kIdentity };

// Lattice's fields (docs/model-format.md, `lattice`); dims live in ModelConfig: head_k_dim = m
// (num_slots), head_v_dim = d (head_dim).
struct LatticeConfig {
  LatticeVariant variant = LatticeVariant::kDec;
  bool shared_qk = true;            // qk_projection: shared (one qk_proj, one conv window)
  bool conv_silu = false;           // conv_activation: silu
  bool qk_l2 = false;               // qk_norm: l2
  bool use_forget_gate = true;      // μ from f_proj
  bool use_output_norm = false;     // per-head RMSNorm (o_norm) before the GELU gate
  LatticeInit initial_state = LatticeInit::kAuto;
  bool analytic_renorm = false;     // state_renorm: analytic
  bool normalized_readout = false;  // readout: normalized
};

// fla linear-attention feature maps (config `feature_map`), and GLA/DeltaNet q/k activations.
enum class FeatureMapType { kIdentity, kElu, kRelu, kHadamard, kHedgehog, kT2R, kDpfp, kSilu };

enum class QkNorm { kNone, kL2, kSum };

struct ModelConfig {
  ModelFamily family = ModelFamily::kGatedDeltaNet;
  std::string model_type;  // as written in config.json

  // Shared skeleton.
  int64_t vocab_size = 32000;
  int64_t hidden_size = 2048;
  int64_t num_hidden_layers = 24;
  int64_t intermediate_size = 0;  // resolved: config value or fla's GatedMLP rule
  float norm_eps = 1e-6f;
  bool tie_word_embeddings = false;
  int64_t bos_token_id = 1;
  int64_t eos_token_id = 2;

  // Mixer dimensions, resolved per family (fla's formulas).
  int64_t num_heads = 0;     // q/k heads (linear_attn, gla: q heads)
  int64_t num_kv_heads = 0;  // linear_attn, gla: k/v heads (= num_heads when absent)
  int64_t num_v_heads = 0;   // gated_deltanet: value heads (= num_heads when absent); others = v heads
  int64_t head_k_dim = 0;    // per-head key dim before any feature map
  int64_t head_v_dim = 0;    // per-head value dim
  int64_t key_dim = 0;       // q_proj output size = num_heads · head_k_dim
  int64_t value_dim = 0;     // o_proj input size = (value heads) · head_v_dim

  // Token pipeline.
  bool use_short_conv = false;
  int64_t conv_size = 4;
  bool use_gate = false;           // delta_net/gated_deltanet/swla/titans output gate (g_proj)
  bool use_output_gate = false;    // gla output gate (g_proj)
  bool use_beta = true;            // delta_net
  bool allow_neg_eigval = false;   // delta_net, gated_deltanet: β ← 2β
  FeatureMapType qk_activation = FeatureMapType::kSilu;  // delta_net
  QkNorm qk_norm = QkNorm::kL2;                          // delta_net (gated_deltanet, swla, titans: L2)

  // linear_attn.
  FeatureMapType feature_map = FeatureMapType::kIdentity;  // linear_attn; gla: kIdentity = none
  bool tie_feature_map_qk = false;
  bool norm_q = false;
  bool norm_k = false;
  bool norm_feature_map = false;  // normalised recurrence (o / (q·z))

  // gla.
  std::optional<float> clamp_min;
  int64_t gate_low_rank_dim = 16;
  float gate_logit_normalizer = 16.0f;

  // titans: 1 = matrix memory, 2 = MLP memory; dla: always 2 (docs/model-format.md).
  int64_t memory_depth = 1;
  // Deep (MLP) memories, memory_depth 2: M(x) = x + [LN](W1 GELU(W2 x)), W2 [expansion·d, d].
  int64_t memory_expansion = 4;
  bool memory_layer_norm = false;
  int64_t inner_chunk_size = 1;  // b: tokens per inner mini-batch (gradients at the chunk's anchor)

  // True for the families whose memory is an MLP per head (dla, titans with memory_depth 2).
  bool deep_memory() const { return memory_depth == 2; }

  // lattice only.
  LatticeConfig lattice;
  // hope only (head_k_dim = head_v_dim = head_dim; conv_size is the memory's conv window).
  HopeConfig hope;
  // gam only (learned positions, LayerNorm, memory bank; docs/model-format.md `gam`).
  GamConfig gam;
  // armt only (GPT-2 over segments with a per-layer associative memory; docs/model-format.md `armt`).
  ArmtConfig armt;

  // The most positions a sequence may reach (block_size for gam without position clamping); 0 = no limit.
  int64_t max_positions() const {
    return family == ModelFamily::kGam && !gam.clamp_positions ? gam.block_size : 0;
  }

  // Memory Caching (config.json `memory_caching`); nullopt = off.
  std::optional<McConfig> memory_caching;
};

// Parses config.json text. `source` names the file in error messages.
// Unknown model_type, missing required keys, wrong types or inconsistent dims → InvalidArgument.
absl::StatusOr<ModelConfig> ParseModelConfig(const std::string& json_text, const std::string& source);

// Reads and parses `<dir>/config.json`.
absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& dir);

}  // namespace mcserve::engine
