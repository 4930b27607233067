// Model: a loaded recurrent LM (fla block skeleton: embedding [+ learned positions: gam] → N × [norm →
// mixer → residual → feed-forward levels (norm → MLP → residual each; feed_forward.h)] → norm → LM head;
// the norms RMSNorm, or LayerNorm for gam) that runs varlen batches of token chunks, each bound to a
// state slot. Load from any thread; Forward from one thread at a time (the engine loop).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/model_config.h"
#include "engine/model/tokenizer.h"
#include "engine/model/weights.h"
#include "engine/runner/armt_stack.h"
#include "engine/runner/mixer.h"
#include "engine/runner/norm.h"
#include "engine/runner/position_table.h"
#include "engine/runner/state_pool.h"
#include "kernels/core/context.h"
#include "kernels/core/host_block_cache.h"
#include "kernels/cpu/thread_pool.h"

namespace mcserve::engine {

struct ModelOptions {
  kernels::Device device = kernels::Device::kCpu;
  int num_threads = 0;  // CPU worker threads; 0 = all cores
  // Memory Caching fields to override on top of config.json's `memory_caching` (e.g.
  // {"aggregation", "ssc"}; "aggregation" = "none" turns MC off). See docs/memory-caching.md.
  std::map<std::string, std::string> mc_overrides;
};

// One slot's tokens in a step: run `tokens` (≥ 1) through slot `slot`'s state. The one type from
// the engine's batch plan through ModelRunner::Step to Forward; plain value, the span points into
// the request (its prompt or last sampled token).
// A close chunk (close_segment, no tokens; armt only) closes the slot's full open segment: the
// model runs its memory tokens against the segment and writes its memory (Model::close_tokens()).
struct SequenceChunk {
  int slot = 0;
  std::span<const int32_t> tokens;
  bool all_logits = false;     // logits for every token (else only the last)
  bool close_segment = false;  // a segment close (armt): no tokens, no logits
  // Whether the tokens are user-provided (prompt): with an adaptive CMS (hope cms_adaptive) the loss
  // of the position before each token then trains the CMS; sampled tokens pass false.
  bool learn = true;
};

class Model {
 public:
  // Loads config.json, the weights (validated against the config) and tokenizer.model from `dir`.
  static absl::StatusOr<std::unique_ptr<Model>> Load(const std::string& dir, const ModelOptions& options = {});
  ~Model();

  const ModelConfig& config() const { return config_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const kernels::Context& context() const { return ctx_; }
  // Elements of the distinct weight tensors the model bound (a tied head counted once).
  int64_t num_parameters() const { return num_parameters_; }

  // A pool of `num_slots` zeroed state slots shaped for this model, with a checkpoint store of the
  // given tier budgets.
  absl::StatusOr<StatePool> NewStatePool(int num_slots, const CheckpointStoreOptions& checkpoints = {}) const;

  // Content tokens `slot` may run before its open segment must be closed by a close chunk (armt:
  // S − c, 0 = close first); every other family: no limit (INT64_MAX).
  int64_t SegmentTokensLeft(const StatePool& pool, int slot) const;
  // Tokens a close chunk runs (armt: num_mem_tokens); 0 for the families that never close.
  int64_t close_tokens() const { return armt_ ? config_.armt.num_mem_tokens : 0; }

  // Runs the chunks (distinct slots) as one batch, updating their states. Returns logits
  // [R, vocab] on the model's device: per content chunk in order, every row if all_logits else the
  // last; close chunks (armt) add no rows. An armt content chunk must fit in its slot's open segment.
  // Token ids outside the vocabulary, or (gam without position clamping) a token position ≥
  // block_size → InvalidArgument, before any state changes. With an adaptive CMS (hope cms_adaptive) the
  // chunks run one token per slot per step, training the slots' CMS copies (model_adaptive.cc).
  absl::StatusOr<kernels::Tensor> Forward(std::span<const SequenceChunk> chunks, StatePool& pool) const;

 private:
  struct Block;
  Model() = default;
  // Binds the embeddings, blocks, final norm and head (names per family) with `w`.
  absl::Status BindWeights(WeightBinder& w);
  // The chunks' token ids and positions checked (vocabulary, position limit).
  absl::Status CheckChunks(std::span<const SequenceChunk> chunks, const StatePool& pool) const;
  // armt's Forward (after CheckChunks): logits of the content chunks' rows.
  absl::StatusOr<kernels::Tensor> ForwardArmt(std::span<const SequenceChunk> chunks, StatePool& pool) const;
  // logits [rows, vocab] = head(final_norm(h[rows])) for h [T, H].
  absl::StatusOr<kernels::Tensor> Logits(const kernels::Tensor& h, std::span<const int32_t> rows) const;
  // armt: the residual stream of every row (ArmtStack::Forward).
  absl::StatusOr<kernels::Tensor> RunArmt(std::span<const SequenceChunk> chunks, StatePool& pool) const;
  absl::Status RunBlock(const Block& block, kernels::Tensor& h, const MixerBatch& batch, LayerState& state) const;
  // Forward of validated chunks as one batch (every family; adaptive CMS: one token per slot).
  absl::StatusOr<kernels::Tensor> ForwardBatch(std::span<const SequenceChunk> chunks, StatePool& pool) const;

  // Adaptive CMS (model_adaptive.cc): binds the head's F32 weights for the backward.
  absl::Status BindAdaptiveHead(WeightBinder& w);
  // Runs the chunks one token per slot per step, training before each token (learn flags, boundaries).
  absl::StatusOr<kernels::Tensor> ForwardAdaptive(std::span<const SequenceChunk> chunks, StatePool& pool) const;
  // Before a token of slot: restart (position 0), or train on the saved last token's loss for target
  // `token` when `learn`; then apply the levels' boundaries.
  absl::Status BeginAdaptiveToken(int slot, int32_t token, bool learn, StatePool& pool) const;
  // G += ∂L/∂θ of slot's saved last token, L = −log softmax(logits)[target].
  absl::Status LearnLastToken(int slot, int32_t target, StatePool& pool) const;
  // Token s of every chunk as one batch (ForwardAdaptive); its logits rows go to out [R, vocab].
  absl::Status AdaptiveStep(std::span<const SequenceChunk> chunks, int64_t s, std::span<const int64_t> first_row,
                            StatePool& pool, kernels::Tensor& out) const;
  // Adaptive CMS, in RunBlock: saves each row of h [slots, H] as its slot's `name` ("cms_last_x": the block
  // input, "cms_last_h": after the mixer).
  absl::Status SaveRows(const Block& b, const char* name, kernels::Tensor& h, const MixerBatch& batch,
                        LayerState& state) const;
  // Adaptive CMS, in RunBlock: saves h [slots, H] as "cms_last_h", then runs each slot's CMS on its row.
  absl::Status RunAdaptiveCms(const Block& b, kernels::Tensor& h, const MixerBatch& batch, LayerState& state) const;

  ModelConfig config_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::shared_ptr<const WeightStore> weights_;
  std::unique_ptr<kernels::cpu::ThreadPool> pool_;
  kernels::Context ctx_;
  kernels::Tensor embeddings_;               // [vocab, H]
  std::optional<PositionTable> positions_;  // [block_size, H] (gam)
  std::optional<ArmtStack> armt_;           // armt: inputs, positions and layers (no Blocks)
  std::vector<Block> blocks_;
  Norm final_norm_;                         // [H]
  kernels::Tensor lm_head_;                 // [vocab, H] (the embeddings when tied)
  bool adaptive_cms_ = false;               // hope with cms_adaptive (model_adaptive.cc)
  kernels::Tensor final_norm_f32_;          // [H] F32 (adaptive CMS)
  kernels::Tensor lm_head_t_;               // [H, vocab] F32 lm_headᵀ (adaptive CMS)
  int64_t num_parameters_ = 0;
  // ForwardBatch's host lists, refilled by every call (Forward's thread only).
  struct BatchLists {
    std::vector<int32_t> ids;         // [T] the batch's token ids
    std::vector<int32_t> logit_rows;  // rows of h whose logits are returned
    MixerBatch batch;                 // cu, slots, positions (its layout points at the call's tensors)
  };
  mutable BatchLists batch_lists_;
  // The host buffers of the tensors a Forward makes, reused by the next one (Forward's thread only).
  mutable kernels::HostBlockCache host_blocks_;
};

}  // namespace mcserve::engine
