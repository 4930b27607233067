// GLA (fla/layers/gla.py): low-rank per-key-channel decay α = exp(logsigmoid(gk)/16), additive write.
#include "absl/strings/str_cat.h"
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

class GlaMixer : public Mixer {
 public:
  static absl::StatusOr<std::unique_ptr<Mixer>> Make(const ModelConfig& c, const WeightBinder& w, int layer) {
    auto m = std::make_unique<GlaMixer>();
    const std::string attn = absl::StrCat("model.layers.", layer, ".attn.");
    const int64_t h = c.hidden_size;
    m->hq_ = c.num_heads;
    m->hkv_ = c.num_kv_heads;
    m->dk_ = c.head_k_dim;
    m->dv_ = c.head_v_dim;
    m->conv_size_ = c.conv_size;
    m->normalizer_ = c.gate_logit_normalizer;
    m->clamp_min_ = c.clamp_min;
    switch (c.feature_map) {
      case FeatureMapType::kIdentity: m->qk_act_ = ActivationKind::kIdentity; break;
      case FeatureMapType::kRelu: m->qk_act_ = ActivationKind::kRelu; break;
      case FeatureMapType::kSilu: m->qk_act_ = ActivationKind::kSilu; break;
      default:
        return absl::InvalidArgumentError("gla: only feature_map null, \"relu\", \"silu\" or \"swish\" is supported");
    }
    MCSERVE_ASSIGN_OR_RETURN(m->q_, ConvProjection::Bind(w, attn, "q", m->hq_ * m->dk_, h, c.use_short_conv, c.conv_size));
    MCSERVE_ASSIGN_OR_RETURN(m->k_, ConvProjection::Bind(w, attn, "k", m->hkv_ * m->dk_, h, c.use_short_conv, c.conv_size));
    MCSERVE_ASSIGN_OR_RETURN(m->v_, ConvProjection::Bind(w, attn, "v", m->hkv_ * m->dv_, h, c.use_short_conv, c.conv_size));
    const int64_t rank = c.gate_low_rank_dim;
    MCSERVE_ASSIGN_OR_RETURN(m->gk0_, w.Matrix(attn + "gk_proj.0.weight", {rank, h}));
    MCSERVE_ASSIGN_OR_RETURN(m->gk1_, w.Matrix(attn + "gk_proj.1.weight", {m->hkv_ * m->dk_, rank}));
    MCSERVE_ASSIGN_OR_RETURN(m->gk1_bias_, w.Float(attn + "gk_proj.1.bias", {m->hkv_ * m->dk_}));
    // fla names the norm g_norm_swish_gate when it is fused with the swish output gate.
    const std::string norm = w.Has(attn + "g_norm_swish_gate.weight") ? "g_norm_swish_gate" : "g_norm";
    MCSERVE_ASSIGN_OR_RETURN(m->memory_, MemoryStage::Bind(c, w, layer,
                                                           {.q_heads = m->hq_, .k_heads = m->hkv_, .state_heads = m->hq_,
                                                            .dk = m->dk_, .dv = m->dv_},
                                                           {}, /*normalized=*/false));
    MCSERVE_ASSIGN_OR_RETURN(m->output_, GatedOutput::Bind(w, attn, h, m->hq_, m->dv_, c.use_output_gate,
                                                           c.norm_eps, norm));
    return m;
  }

  std::vector<StateSpec> StateSpecs() const override {
    std::vector<StateSpec> specs = {{"memory", {hq_, dk_, dv_}}};
    for (const ConvProjection* p : {&q_, &k_, &v_}) p->AddStateSpec(conv_size_, &specs);
    memory_.AddStateSpecs(&specs);
    return specs;
  }

  absl::Status Forward(const Context& ctx, const Tensor& x, const MixerBatch& batch, LayerState& state,
                       Tensor* out) const override {
    const kernels::BatchLayout& layout = batch.layout;
    const int64_t t = x.dim(0);
    // One grouped GEMM over x: q, k, v, the decay's low-rank gk0, then the output gate.
    kernels::TensorPtrList weights = {&q_.w, &k_.w, &v_.w, &gk0_};
    const Tensor* g_proj = output_.gate_weight();
    if (g_proj != nullptr) weights.push_back(g_proj);
    MCSERVE_ASSIGN_OR_RETURN(kernels::TensorList xw, ProjectMany(ctx, x, weights));
    MCSERVE_ASSIGN_OR_RETURN(Tensor q, q_.RunProjected(ctx, std::move(xw[0]), layout, state));  // [T, Hq·K]
    MCSERVE_ASSIGN_OR_RETURN(Tensor k, k_.RunProjected(ctx, std::move(xw[1]), layout, state));  // [T, Hkv·K]
    MCSERVE_ASSIGN_OR_RETURN(Tensor v, v_.RunProjected(ctx, std::move(xw[2]), layout, state));  // [T, Hkv·V]
    MCSERVE_ASSIGN_OR_RETURN(Tensor decay, KeyDecay(ctx, xw[3]));                             // [T, Hkv·K]
    if (qk_act_ != ActivationKind::kIdentity) {
      MCSERVE_RETURN_IF_ERROR(Activate(ctx, q, qk_act_));
      MCSERVE_RETURN_IF_ERROR(Activate(ctx, k, qk_act_));
    }
    MCSERVE_RETURN_IF_ERROR(Activate(ctx, q, ActivationKind::kIdentity, QueryScale(dk_)));
    MCSERVE_ASSIGN_OR_RETURN(Tensor q3, q.Reshape({t, hq_, dk_}));
    MCSERVE_ASSIGN_OR_RETURN(Tensor k3, k.Reshape({t, hkv_, dk_}));
    MCSERVE_ASSIGN_OR_RETURN(Tensor v3, v.Reshape({t, hkv_, dv_}));
    MCSERVE_ASSIGN_OR_RETURN(Tensor decay3, decay.Reshape({t, hkv_, dk_}));
    MCSERVE_ASSIGN_OR_RETURN(Tensor o, NewF32(ctx, {t, hq_, dv_}));
    const LinearRule rule(
        {.rule = kernels::LinearMemoryRule::kAdditive, .q = &q3, .k = &k3, .v = &v3, .key_decay = &decay3}, "");
    MCSERVE_RETURN_IF_ERROR(memory_.Run(ctx, x, rule, batch, state, &o));
    return output_.RunProjected(ctx, g_proj != nullptr ? &xw.back() : nullptr, o, out);
  }

 private:
  // α = exp(max(logsigmoid(W1 low + b1) / normalizer, clamp_min)) → [T, Hkv·K], low = W0 x [T, r].
  absl::StatusOr<Tensor> KeyDecay(const Context& ctx, const Tensor& low) const {
    MCSERVE_ASSIGN_OR_RETURN(Tensor logits, Project(ctx, low, gk1_));
    MCSERVE_ASSIGN_OR_RETURN(Tensor bias_rows, BroadcastRows(ctx, gk1_bias_, low.dim(0)));
    MCSERVE_RETURN_IF_ERROR(kernels::Add(ctx, {.a = &logits, .b = &bias_rows, .out = &logits}));
    MCSERVE_ASSIGN_OR_RETURN(Tensor alpha, NewF32(ctx, logits.shape()));
    MCSERVE_RETURN_IF_ERROR(kernels::Gate(ctx, {.kind = kernels::GateKind::kLogSigmoidDecay, .x = &logits,
                                                .normalizer = normalizer_, .has_clamp_min = clamp_min_.has_value(),
                                                .clamp_min = clamp_min_.value_or(0.0f), .out = &alpha}));
    return alpha;
  }

  int64_t hq_ = 0, hkv_ = 0, dk_ = 0, dv_ = 0, conv_size_ = 4;
  float normalizer_ = 16.0f;
  std::optional<float> clamp_min_;
  ActivationKind qk_act_ = ActivationKind::kIdentity;
  ConvProjection q_, k_, v_;
  Tensor gk0_, gk1_, gk1_bias_;  // [rank, H], [Hkv·K, rank], [Hkv·K]
  MemoryStage memory_;
  GatedOutput output_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Mixer>> MakeGlaMixer(const ModelConfig& c, const WeightBinder& w, int layer) {
  return GlaMixer::Make(c, w, layer);
}

}  // namespace mcserve::engine
