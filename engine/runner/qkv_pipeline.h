// The token pipeline and output stage shared by the delta-style mixers (DeltaNet, gated DeltaNet,
// SWLA, Titans): q, k, v projections with short convs and activations, q/k normalisation and
// scaling, and the per-head output norm, optional swish gate and o_proj. Engine loop thread.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/model_config.h"
#include "engine/runner/mixer_ops.h"
#include "engine/mc/memory_stage.h"
#include "kernels/linear_memory/linear_memory.h"
#include "kernels/delta_decode/delta_decode.h"

namespace mcserve::engine {

struct QkvOptions {
  int64_t q_heads = 0, v_heads = 0;  // q and k share q_heads
  int64_t dk = 0, dv = 0;
  bool use_conv = true;
  int64_t conv_size = 4;
  kernels::ActivationKind qk_act = kernels::ActivationKind::kSilu;  // SiLU runs inside the conv
  bool qk_l2 = true;  // L2 (eps 1e-6); false: sum normalisation (no eps)
  bool scale_q = true;  // q times dk^-0.5 (matrix memories); the MLP memories read unit-norm q
};

// SWLA / Titans: num_heads q, k and v heads of head_k_dim / head_v_dim, SiLU + L2 (GDN's pipeline).
QkvOptions EqualHeadOptions(const ModelConfig& c);

class QkvPipeline {
 public:
  // Binds `<attn>{q,k,v}_proj.weight` (and `{q,k,v}_conv1d.weight` with convs).
  static absl::StatusOr<QkvPipeline> Bind(const WeightBinder& w, const std::string& attn, int64_t hidden,
                                          const QkvOptions& options);
  void AddStateSpecs(std::vector<StateSpec>* specs) const;

  struct Qkv {
    kernels::Tensor q;  // [T, q_heads, dk], normalised (and scaled by dk^-0.5 when scale_q)
    kernels::Tensor k;  // [T, q_heads, dk], normalised
    kernels::Tensor v;  // [T, v_heads, dv]
    kernels::TensorList extra;  // [T, n_i]: x·w_iᵀ for each weight of `extra`, in order
  };
  // x [T, hidden] → q, k, v. The q, k, v projections and the caller's `extra` weights ([n_i, hidden]
  // each: gates, the output gate) run as one grouped GEMM.
  absl::StatusOr<Qkv> Run(const kernels::Context& ctx, const kernels::Tensor& x,
                          const kernels::BatchLayout& layout, LayerState& state,
                          std::span<const kernels::Tensor* const> extra = {}) const;
  // The grouped GEMM alone: x [T, hidden] → [T, n] rows of q, k, v, then of each `extra` weight.
  absl::StatusOr<kernels::TensorList> Project(const kernels::Context& ctx, const kernels::Tensor& x,
                                              std::span<const kernels::Tensor* const> extra) const;

  // Whether DeltaDecode takes this pipeline's decode step: convs with SiLU on q, k and v, L2-normalised
  // q and k, as many q as v heads, head widths multiples of 8.
  bool FusesDecode() const;
  // Sets DeltaDecode's convs, taps, q scale and norm eps in `args`: projected [T, D] rows of q, k and v
  // (Project's first three) convolved into rows [T, D] each; both must outlive the call args go to.
  void SetDecodeConvs(std::span<const kernels::Tensor> projected, std::span<kernels::Tensor, 3> rows,
                      const kernels::BatchLayout& layout, LayerState& state, kernels::DeltaDecodeArgs* args) const;

 private:
  absl::StatusOr<kernels::Tensor> RunQk(const kernels::Context& ctx, const ConvProjection& p,
                                        kernels::Tensor projected, const kernels::BatchLayout& layout,
                                        LayerState& state) const;
  float query_scale() const { return options_.scale_q ? QueryScale(options_.dk) : 1.0f; }
  static constexpr float kL2Eps = 1e-6f;  // the q and k L2 norms' eps

  QkvOptions options_;
  ConvProjection q_, k_, v_;
};

// Per-head RMSNorm (weight `<attn><norm_name>.weight` [dv]), times swish(g_proj x) when gated, then
// o_proj [hidden, heads·dv].
class GatedOutput {
 public:
  static absl::StatusOr<GatedOutput> Bind(const WeightBinder& w, const std::string& attn, int64_t hidden,
                                          int64_t heads, int64_t dv, bool use_gate, float eps,
                                          const std::string& norm_name);
  // o [T, heads, dv] (normalised in place), x [T, hidden] (for the gate) → out [T, hidden].
  absl::Status Run(const kernels::Context& ctx, const kernels::Tensor& x, kernels::Tensor& o,
                   kernels::Tensor* out) const;
  // The same with the gate already projected: gate = x·g_projᵀ [T, heads·dv] (null when ungated).
  absl::Status RunProjected(const kernels::Context& ctx, const kernels::Tensor* gate, kernels::Tensor& o,
                            kernels::Tensor* out) const;
  // g_proj [heads·dv, hidden], or null without the gate (for a caller's grouped projection).
  const kernels::Tensor* gate_weight() const { return g_proj_ ? &*g_proj_ : nullptr; }

 private:
  std::optional<kernels::Tensor> g_proj_;  // [heads·dv, hidden]
  kernels::Tensor norm_;                   // [dv]
  kernels::Tensor o_proj_;                 // [hidden, heads·dv]
  float eps_ = 1e-6f;
};

// A gated-delta mixer's gates as DeltaDecode takes them: b_proj's and a_proj's projected rows and
// the decay's parameters.
struct DecodeGates {
  const kernels::Tensor* beta_logits = nullptr;   // [T, Hv], or null: β = beta_scale
  float beta_scale = 1.0f;
  const kernels::Tensor* decay_logits = nullptr;  // [T, Hv], or null: no decay
  const kernels::Tensor* a_log = nullptr;         // [Hv], with decay_logits
  const kernels::Tensor* dt_bias = nullptr;       // [Hv], with decay_logits
};

// What the delta-style mixers (DeltaNet, gated DeltaNet, SWLA, Titans) bind and run alike: the
// q/k/v pipeline, the memory read-out into o and the gated output stage around a memory rule.
struct DeltaStyleCore {
  std::string attn;  // "model.layers.{i}.attn."
  QkvOptions dims;
  QkvPipeline qkv;
  MemoryStage memory;
  GatedOutput output;

  // Binds layer `layer`'s projections, convs, memory (with Memory Caching when configured; `aux` is
  // the rule's auxiliary state) and output stage (use_gate and norm_eps from `c`).
  static absl::StatusOr<DeltaStyleCore> Bind(const ModelConfig& c, const WeightBinder& w, int layer,
                                             const QkvOptions& dims, MemoryStage::Aux aux = {});
  // State per slot: "memory" [v_heads, dk, dv], then `extra`, then the conv windows and MC's.
  std::vector<StateSpec> StateSpecs(std::vector<StateSpec> extra = {}) const;
  // What a mixer's Forward projects from x before its memory: q, k, v, the mixer's own gate
  // projections and the output gate.
  struct Inputs {
    QkvPipeline::Qkv qkv;              // qkv.extra: [T, n_i] for the mixer's `gates`, in order
    std::optional<kernels::Tensor> gate;  // [T, v_heads·dv] output gate x·g_projᵀ (when gated)
  };
  // x [T, hidden] → Inputs, every projection of x (q, k, v, `gates` [n_i, hidden] each, g_proj) in
  // one grouped GEMM.
  absl::StatusOr<Inputs> Project(const kernels::Context& ctx, const kernels::Tensor& x, const MixerBatch& batch,
                                 LayerState& state, kernels::TensorPtrList gates) const;
  // Runs the mixer's memory `rule` (over its qkv) through the memory stage, then the output stage
  // (with the inputs' gate) into out [T, hidden].
  absl::Status Finish(const kernels::Context& ctx, const kernels::Tensor& x, const Inputs& inputs,
                      const MemoryRule& rule, const MixerBatch& batch, LayerState& state,
                      kernels::Tensor* out) const;

  // The fused decode step (DeltaDecode) of a gated-delta mixer: whether it applies to this pass (the CPU,
  // one token per sequence, a pipeline it takes, no Memory Caching on this layer or MC with constant
  // segments, which then reads the checkpoints after DeltaDecode's online read-out).
  bool FusesDecode(const kernels::Context& ctx, const MixerBatch& batch, int64_t tokens) const;
  // Its projections: every projection of x [T, hidden] in one grouped GEMM, [T, n] rows each: q, k, v,
  // then `gates` in order, then g_proj's when gated.
  absl::StatusOr<kernels::TensorList> ProjectDecode(const kernels::Context& ctx, const kernels::Tensor& x,
                                                    std::span<const kernels::Tensor* const> gates) const;
  // The rest: β and the decay from `gates`, q, k and v convolved and normalised, and the gated delta
  // rule in one DeltaDecode, Memory Caching's read-out of the checkpoints when the layer caches (x
  // [T, hidden] for its u_proj gate), then the output stage into out [T, hidden]. `projected` from
  // ProjectDecode.
  absl::Status FinishDecode(const kernels::Context& ctx, const kernels::Tensor& x,
                            const kernels::TensorList& projected, const DecodeGates& gates, const MixerBatch& batch,
                            LayerState& state, kernels::Tensor* out) const;
};

// Tests: true turns DeltaStyleCore::FusesDecode off everywhere (the decode step's convs, norms and
// memory then run op by op), false restores it. Not while a forward pass runs.
void SetDecodeFusionOffForTesting(bool off);
bool DecodeFusionOffForTesting();
// Fused decode steps (DeltaStyleCore::FinishDecode calls) run in this process so far, for tests that
// must know the fused path ran. Any thread.
uint64_t FusedDecodeStepsForTesting();

// σ(W x)·scale for a per-head scalar gate: W [heads, hidden] → [T, heads].
absl::StatusOr<kernels::Tensor> SigmoidGate(const kernels::Context& ctx, const kernels::Tensor& x,
                                            const kernels::Tensor& w, float scale = 1.0f);
// The same from the projection W x [T, heads] (from a grouped projection), in place.
absl::StatusOr<kernels::Tensor> SigmoidGate(const kernels::Context& ctx, kernels::Tensor projected,
                                            float scale = 1.0f);

}  // namespace mcserve::engine
