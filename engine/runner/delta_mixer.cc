// DeltaNet and gated DeltaNet (fla/layers/{delta_net,gated_deltanet}.py): one gated-delta memory;
// DeltaNet is the case without decay.
#include "engine/mc/linear_rule.h"
#include "engine/runner/mixer.h"
#include "engine/runner/qkv_pipeline.h"
#include "base/status_macros.h"
#include "kernels/gate/gate.h"

#include <optional>
#include <span>
#include <vector>

namespace mcserve::engine {
namespace {

using kernels::ActivationKind;
using kernels::Context;
using kernels::Tensor;

ActivationKind QkActivation(FeatureMapType t) {
  switch (t) {
    case FeatureMapType::kSilu: return ActivationKind::kSilu;
    case FeatureMapType::kRelu: return ActivationKind::kRelu;
    case FeatureMapType::kElu: return ActivationKind::kEluPlusOne;
    default: return ActivationKind::kIdentity;
  }
}

class DeltaMixer : public Mixer {
 public:
  static absl::StatusOr<std::unique_ptr<Mixer>> Make(const ModelConfig& c, const WeightBinder& w, int layer) {
    auto m = std::make_unique<DeltaMixer>();
    m->gated_ = c.family == ModelFamily::kGatedDeltaNet;
    const int64_t h = c.hidden_size, hv = m->gated_ ? c.num_v_heads : c.num_heads;
    m->beta_scale_ = c.allow_neg_eigval ? 2.0f : 1.0f;
    MCSERVE_ASSIGN_OR_RETURN(
        m->core_, DeltaStyleCore::Bind(c, w, layer,
                                       {.q_heads = c.num_heads, .v_heads = hv, .dk = c.head_k_dim, .dv = c.head_v_dim,
                                        .use_conv = c.use_short_conv, .conv_size = c.conv_size,
                                        .qk_act = m->gated_ ? ActivationKind::kSilu : QkActivation(c.qk_activation),
                                        .qk_l2 = m->gated_ || c.qk_norm == QkNorm::kL2}));
    const std::string& attn = m->core_.attn;
    if (m->gated_ || c.use_beta) {
      MCSERVE_ASSIGN_OR_RETURN(Tensor b, w.Matrix(attn + "b_proj.weight", {hv, h}));
      m->b_proj_ = std::move(b);
    }
    if (m->gated_) {
      MCSERVE_ASSIGN_OR_RETURN(m->a_proj_, w.Matrix(attn + "a_proj.weight", {hv, h}));
      MCSERVE_ASSIGN_OR_RETURN(m->a_log_, w.Float(attn + "A_log", {hv}));
      MCSERVE_ASSIGN_OR_RETURN(m->dt_bias_, w.Float(attn + "dt_bias", {hv}));
    }
    return m;
  }

  std::vector<StateSpec> StateSpecs() const override { return core_.StateSpecs(); }

  absl::Status Forward(const Context& ctx, const Tensor& x, const MixerBatch& batch, LayerState& state,
                       Tensor* out) const override {
    // One grouped GEMM: q, k, v, then b_proj and a_proj when present, then the output gate.
    const Tensor* gate_weights[2];
    size_t num_gates = 0;
    if (b_proj_) gate_weights[num_gates++] = &*b_proj_;
    if (gated_) gate_weights[num_gates++] = &a_proj_;
    const std::span<const Tensor* const> gates(gate_weights, num_gates);
    if (core_.FusesDecode(ctx, batch, x.dim(0))) {  // the decode step's gates, convs, norms and memory in one op
      MCSERVE_ASSIGN_OR_RETURN(kernels::TensorList projected, core_.ProjectDecode(ctx, x, gates));
      const DecodeGates decode_gates{.beta_logits = b_proj_ ? &projected[3] : nullptr, .beta_scale = beta_scale_,
                                     .decay_logits = gated_ ? &projected[2 + num_gates] : nullptr,
                                     .a_log = gated_ ? &a_log_ : nullptr, .dt_bias = gated_ ? &dt_bias_ : nullptr};
      return core_.FinishDecode(ctx, x, projected, decode_gates, batch, state, out);
    }
    MCSERVE_ASSIGN_OR_RETURN(DeltaStyleCore::Inputs in,
                             core_.Project(ctx, x, batch, state, kernels::TensorPtrList(gates.begin(), gates.end())));
    const QkvPipeline::Qkv& qkv = in.qkv;
    MCSERVE_ASSIGN_OR_RETURN(RuleGates g, Gates(ctx, std::span(in.qkv.extra), x.dim(0)));
    const LinearRule rule({.rule = kernels::LinearMemoryRule::kGatedDelta, .q = &qkv.q, .k = &qkv.k, .v = &qkv.v,
                           .decay = g.decay ? &*g.decay : nullptr, .beta = &g.beta},
                          "");
    return core_.Finish(ctx, x, in, rule, batch, state, out);
  }

 private:
  struct RuleGates {
    Tensor beta;                 // [T, Hv]
    std::optional<Tensor> decay;  // [T, Hv], gated only
  };
  // β and the decay from the projected gates ([T, Hv] each: b_proj's when present, then a_proj's when
  // gated; β is consumed in place).
  absl::StatusOr<RuleGates> Gates(const Context& ctx, std::span<Tensor> projected, int64_t t) const {
    const int64_t hv = core_.dims.v_heads;
    RuleGates g;
    if (b_proj_) {
      MCSERVE_ASSIGN_OR_RETURN(g.beta, SigmoidGate(ctx, std::move(projected.front()), beta_scale_));
    } else {  // use_beta = false: β = 1 (×2 with allow_neg_eigval)
      MCSERVE_ASSIGN_OR_RETURN(g.beta, NewF32(ctx, {t, hv}));
      MCSERVE_RETURN_IF_ERROR(g.beta.CopyFromHost(std::vector<float>(t * hv, beta_scale_)));
    }
    if (gated_) {
      const Tensor& a = projected.back();  // [T, Hv] a_proj x
      MCSERVE_ASSIGN_OR_RETURN(g.decay, NewF32(ctx, {t, hv}));
      MCSERVE_RETURN_IF_ERROR(kernels::Gate(ctx, {.kind = kernels::GateKind::kSoftplusDecay, .x = &a,
                                                  .a_log = &a_log_, .dt_bias = &dt_bias_, .out = &*g.decay}));
    }
    return g;
  }

  bool gated_ = false;
  float beta_scale_ = 1.0f;
  DeltaStyleCore core_;
  std::optional<Tensor> b_proj_;     // [Hv, H]
  Tensor a_proj_, a_log_, dt_bias_;  // [Hv, H], [Hv], [Hv]
};

}  // namespace

absl::StatusOr<std::unique_ptr<Mixer>> MakeDeltaMixer(const ModelConfig& c, const WeightBinder& w, int layer) {
  return DeltaMixer::Make(c, w, layer);
}

}  // namespace mcserve::engine
