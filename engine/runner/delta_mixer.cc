// DeltaNet and gated DeltaNet (fla/layers/{delta_net,gated_deltanet}.py): one gated-delta memory;
// DeltaNet is the case without decay.
#include "engine/mc/linear_rule.h"
#include "engine/runner/mixer.h"
#include "engine/runner/qkv_pipeline.h"
#include "base/status_macros.h"
#include "kernels/gate/gate.h"

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
    const int64_t t = x.dim(0), hv = core_.dims.v_heads;
    // One grouped GEMM: q, k, v, then b_proj and a_proj when present, then the output gate.
    kernels::TensorPtrList gates;
    if (b_proj_) gates.push_back(&*b_proj_);
    if (gated_) gates.push_back(&a_proj_);
    MCSERVE_ASSIGN_OR_RETURN(DeltaStyleCore::Inputs in, core_.Project(ctx, x, batch, state, gates));
    const QkvPipeline::Qkv& qkv = in.qkv;
    Tensor beta;  // [T, Hv]
    if (b_proj_) {
      MCSERVE_ASSIGN_OR_RETURN(beta, SigmoidGate(ctx, std::move(in.qkv.extra[0]), beta_scale_));
    } else {  // use_beta = false: β = 1 (×2 with allow_neg_eigval)
      MCSERVE_ASSIGN_OR_RETURN(beta, NewF32(ctx, {t, hv}));
      MCSERVE_RETURN_IF_ERROR(beta.CopyFromHost(std::vector<float>(t * hv, beta_scale_)));
    }
    std::optional<Tensor> decay;  // [T, Hv]
    if (gated_) {
      const Tensor& a = in.qkv.extra.back();  // [T, Hv] a_proj x
      MCSERVE_ASSIGN_OR_RETURN(decay, NewF32(ctx, {t, hv}));
      MCSERVE_RETURN_IF_ERROR(kernels::Gate(ctx, {.kind = kernels::GateKind::kSoftplusDecay, .x = &a,
                                                  .a_log = &a_log_, .dt_bias = &dt_bias_, .out = &*decay}));
    }
    const LinearRule rule({.rule = kernels::LinearMemoryRule::kGatedDelta, .q = &qkv.q, .k = &qkv.k, .v = &qkv.v,
                           .decay = decay ? &*decay : nullptr, .beta = &beta},
                          "");
    return core_.Finish(ctx, x, in, rule, batch, state, out);
  }

 private:
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
