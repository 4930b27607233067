// DeltaNet and gated DeltaNet (fla/layers/{delta_net,gated_deltanet}.py): one gated-delta memory;
// DeltaNet is the case without decay.
#include "absl/strings/str_cat.h"
#include "engine/runner/mixer.h"
#include "engine/runner/qkv_pipeline.h"
#include "kernels/core/status_macros.h"
#include "kernels/gate/gate.h"
#include "kernels/linear_memory/linear_memory.h"

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
    const bool gated = c.family == ModelFamily::kGatedDeltaNet;
    const std::string attn = absl::StrCat("model.layers.", layer, ".attn.");
    const int64_t h = c.hidden_size;
    m->hv_ = gated ? c.num_v_heads : c.num_heads;
    m->dk_ = c.head_k_dim;
    m->dv_ = c.head_v_dim;
    m->beta_scale_ = c.allow_neg_eigval ? 2.0f : 1.0f;
    QkvOptions o{.q_heads = c.num_heads, .v_heads = m->hv_, .dk = m->dk_, .dv = m->dv_,
                 .use_conv = c.use_short_conv, .conv_size = c.conv_size,
                 .qk_act = gated ? ActivationKind::kSilu : QkActivation(c.qk_activation),
                 .qk_l2 = gated || c.qk_norm == QkNorm::kL2};
    MCSERVE_ASSIGN_OR_RETURN(m->qkv_, QkvPipeline::Bind(w, attn, h, o));
    if (gated || c.use_beta) {
      MCSERVE_ASSIGN_OR_RETURN(Tensor b, w.Matrix(attn + "b_proj.weight", {m->hv_, h}));
      m->b_proj_ = std::move(b);
    }
    if (gated) {
      MCSERVE_ASSIGN_OR_RETURN(m->a_proj_, w.Matrix(attn + "a_proj.weight", {m->hv_, h}));
      MCSERVE_ASSIGN_OR_RETURN(m->a_log_, w.Float(attn + "A_log", {m->hv_}));
      MCSERVE_ASSIGN_OR_RETURN(m->dt_bias_, w.Float(attn + "dt_bias", {m->hv_}));
    }
    MCSERVE_ASSIGN_OR_RETURN(m->output_,
                             GatedOutput::Bind(w, attn, h, m->hv_, m->dv_, c.use_gate, c.norm_eps, "o_norm"));
    m->gated_ = gated;
    return m;
  }

  std::vector<StateSpec> StateSpecs() const override {
    std::vector<StateSpec> specs = {{"memory", {hv_, dk_, dv_}}};
    qkv_.AddStateSpecs(&specs);
    return specs;
  }

  absl::Status Forward(const Context& ctx, const Tensor& x, const kernels::BatchLayout& layout, LayerState& state,
                       Tensor* out) const override {
    const int64_t t = x.dim(0);
    MCSERVE_ASSIGN_OR_RETURN(QkvPipeline::Qkv qkv, qkv_.Run(ctx, x, layout, state));
    Tensor beta;  // [T, Hv]
    if (b_proj_) {
      MCSERVE_ASSIGN_OR_RETURN(beta, SigmoidGate(ctx, x, *b_proj_, beta_scale_));
    } else {  // use_beta = false: β = 1 (×2 with allow_neg_eigval)
      MCSERVE_ASSIGN_OR_RETURN(beta, NewF32(ctx, {t, hv_}));
      MCSERVE_RETURN_IF_ERROR(beta.CopyFromHost(std::vector<float>(t * hv_, beta_scale_)));
    }
    std::optional<Tensor> decay;  // [T, Hv]
    if (gated_) {
      MCSERVE_ASSIGN_OR_RETURN(Tensor a, Project(ctx, x, a_proj_));
      MCSERVE_ASSIGN_OR_RETURN(decay, NewF32(ctx, {t, hv_}));
      MCSERVE_RETURN_IF_ERROR(kernels::Gate(ctx, {.kind = kernels::GateKind::kSoftplusDecay, .x = &a,
                                                  .a_log = &a_log_, .dt_bias = &dt_bias_, .out = &*decay}));
    }
    MCSERVE_ASSIGN_OR_RETURN(Tensor o, NewF32(ctx, {t, hv_, dv_}));
    MCSERVE_RETURN_IF_ERROR(kernels::LinearMemory(
        ctx, {.rule = kernels::LinearMemoryRule::kGatedDelta, .q = &qkv.q, .k = &qkv.k, .v = &qkv.v,
              .decay = decay ? &*decay : nullptr, .beta = &beta, .layout = layout,
              .state = &state.at("memory"), .out = &o}));
    return output_.Run(ctx, x, o, out);
  }

 private:
  bool gated_ = false;
  int64_t hv_ = 0, dk_ = 0, dv_ = 0;
  float beta_scale_ = 1.0f;
  QkvPipeline qkv_;
  std::optional<Tensor> b_proj_;        // [Hv, H]
  Tensor a_proj_, a_log_, dt_bias_;     // [Hv, H], [Hv], [Hv]
  GatedOutput output_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Mixer>> MakeDeltaMixer(const ModelConfig& c, const WeightBinder& w, int layer) {
  return DeltaMixer::Make(c, w, layer);
}

}  // namespace mcserve::engine
