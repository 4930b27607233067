// Linear attention (fla/layers/linear_attn.py): φ(q), φ(k) through fla's feature maps, optional
// sum-normalisation of q/k, additive memory (optionally normalised by q·z), per-head RMSNorm.
#include "absl/strings/str_cat.h"
#include "engine/mc/linear_rule.h"
#include "engine/runner/mixer.h"
#include "engine/runner/qkv_pipeline.h"
#include "base/status_macros.h"
#include "kernels/feature_map/feature_map.h"

namespace mcserve::engine {
namespace {

using kernels::Context;
using kernels::FeatureMapKind;
using kernels::Tensor;

FeatureMapKind KindOf(FeatureMapType t) {
  switch (t) {
    case FeatureMapType::kElu: return FeatureMapKind::kElu;
    case FeatureMapType::kRelu: return FeatureMapKind::kRelu;
    case FeatureMapType::kHadamard: return FeatureMapKind::kHadamard;
    case FeatureMapType::kHedgehog: return FeatureMapKind::kHedgehog;
    case FeatureMapType::kT2R: return FeatureMapKind::kT2R;
    case FeatureMapType::kDpfp: return FeatureMapKind::kDpfp;
    default: return FeatureMapKind::kIdentity;
  }
}

// The learned parameters of one feature map module (none for the parameter-free maps).
struct FeatureMapWeights {
  std::optional<Tensor> w1, b1, w2, b2;  // [d, d], [d], [d, d], [d]

  static absl::StatusOr<FeatureMapWeights> Bind(const WeightBinder& w, const std::string& prefix, FeatureMapKind kind,
                                                int64_t d) {
    FeatureMapWeights f;
    auto bind = [&](const std::string& layer, std::optional<Tensor>* weight, std::optional<Tensor>* bias) -> absl::Status {
      MCSERVE_ASSIGN_OR_RETURN(Tensor t, w.Float(prefix + layer + ".weight", {d, d}));
      *weight = std::move(t);
      if (w.Has(prefix + layer + ".bias")) {
        MCSERVE_ASSIGN_OR_RETURN(Tensor b, w.Float(prefix + layer + ".bias", {d}));
        *bias = std::move(b);
      }
      return absl::OkStatus();
    };
    if (kind == FeatureMapKind::kHadamard) {
      MCSERVE_RETURN_IF_ERROR(bind("layer1", &f.w1, &f.b1));
      MCSERVE_RETURN_IF_ERROR(bind("layer2", &f.w2, &f.b2));
    } else if (kind == FeatureMapKind::kHedgehog || kind == FeatureMapKind::kT2R) {
      MCSERVE_RETURN_IF_ERROR(bind("layer", &f.w1, &f.b1));
    }
    return f;
  }

  absl::StatusOr<Tensor> Apply(const Context& ctx, FeatureMapKind kind, const Tensor& x) const {
    const int64_t d_out = kernels::FeatureMapOutDim(kind, x.dim(2));
    MCSERVE_ASSIGN_OR_RETURN(Tensor out, NewF32(ctx, {x.dim(0), x.dim(1), d_out}));
    auto opt = [](const std::optional<Tensor>& t) { return t ? &*t : nullptr; };
    MCSERVE_RETURN_IF_ERROR(kernels::FeatureMap(ctx, {.kind = kind, .x = &x, .w1 = opt(w1), .b1 = opt(b1),
                                                      .w2 = opt(w2), .b2 = opt(b2), .out = &out}));
    return out;
  }
};

class LinearAttnMixer : public Mixer {
 public:
  static absl::StatusOr<std::unique_ptr<Mixer>> Make(const ModelConfig& c, const WeightBinder& w, int layer) {
    auto m = std::make_unique<LinearAttnMixer>();
    const std::string attn = absl::StrCat("model.layers.", layer, ".attn.");
    const int64_t h = c.hidden_size;
    m->hq_ = c.num_heads;
    m->hkv_ = c.num_kv_heads;
    m->dk_ = c.head_k_dim;
    m->dv_ = c.head_v_dim;
    m->kind_ = KindOf(c.feature_map);
    m->dphi_ = kernels::FeatureMapOutDim(m->kind_, m->dk_);
    m->norm_q_ = c.norm_q;
    m->norm_k_ = c.norm_k;
    m->normalize_ = c.norm_feature_map;
    MCSERVE_ASSIGN_OR_RETURN(m->q_proj_, w.Matrix(attn + "q_proj.weight", {m->hq_ * m->dk_, h}));
    MCSERVE_ASSIGN_OR_RETURN(m->k_proj_, w.Matrix(attn + "k_proj.weight", {m->hkv_ * m->dk_, h}));
    MCSERVE_ASSIGN_OR_RETURN(m->v_proj_, w.Matrix(attn + "v_proj.weight", {m->hkv_ * m->dv_, h}));
    // With tie_feature_map_qk one module serves q and k; the checkpoint may keep either name.
    std::string q_prefix = attn + "feature_map_q.", k_prefix = attn + "feature_map_k.";
    if (c.tie_feature_map_qk) {
      const std::string probe = m->kind_ == FeatureMapKind::kHadamard ? "layer1.weight" : "layer.weight";
      if (!w.Has(q_prefix + probe) && w.Has(k_prefix + probe)) q_prefix = k_prefix;
      k_prefix = q_prefix;
    }
    MCSERVE_ASSIGN_OR_RETURN(m->phi_q_, FeatureMapWeights::Bind(w, q_prefix, m->kind_, m->dk_));
    MCSERVE_ASSIGN_OR_RETURN(m->phi_k_, FeatureMapWeights::Bind(w, k_prefix, m->kind_, m->dk_));
    MCSERVE_ASSIGN_OR_RETURN(m->memory_, MemoryStage::Bind(c, w, layer,
                                                           {.q_heads = m->hq_, .k_heads = m->hkv_, .state_heads = m->hq_,
                                                            .dk = m->dphi_, .dv = m->dv_},
                                                           {.name = m->normalize_ ? "normalizer" : ""}, m->normalize_));
    MCSERVE_ASSIGN_OR_RETURN(m->output_,
                             GatedOutput::Bind(w, attn, h, m->hq_, m->dv_, /*use_gate=*/false, c.norm_eps, "norm"));
    return m;
  }

  std::vector<StateSpec> StateSpecs() const override {
    std::vector<StateSpec> specs = {{"memory", {hq_, dphi_, dv_}}};
    if (normalize_) specs.push_back({"normalizer", {hq_, dphi_}});
    memory_.AddStateSpecs(&specs);
    return specs;
  }

  absl::Status Forward(const Context& ctx, const Tensor& x, const MixerBatch& batch, LayerState& state,
                       Tensor* out) const override {
    const int64_t t = x.dim(0);
    MCSERVE_ASSIGN_OR_RETURN(Tensor q, Project(ctx, x, q_proj_));
    MCSERVE_ASSIGN_OR_RETURN(Tensor k, Project(ctx, x, k_proj_));
    MCSERVE_ASSIGN_OR_RETURN(Tensor v, Project(ctx, x, v_proj_));
    MCSERVE_ASSIGN_OR_RETURN(Tensor q3, q.Reshape({t, hq_, dk_}));
    MCSERVE_ASSIGN_OR_RETURN(Tensor k3, k.Reshape({t, hkv_, dk_}));
    MCSERVE_ASSIGN_OR_RETURN(Tensor v3, v.Reshape({t, hkv_, dv_}));
    MCSERVE_ASSIGN_OR_RETURN(Tensor phi_q, phi_q_.Apply(ctx, kind_, q3));  // [T, Hq, dφ]
    MCSERVE_ASSIGN_OR_RETURN(Tensor phi_k, phi_k_.Apply(ctx, kind_, k3));  // [T, Hkv, dφ]
    // fla: q / (Σq + 1e-4) when norm_q, likewise k; then the kernel's scale dφ^-0.5 on q.
    MCSERVE_RETURN_IF_ERROR(NormalizeRowsIf(ctx, phi_q, norm_q_, QueryScale(dphi_)));
    MCSERVE_RETURN_IF_ERROR(NormalizeRowsIf(ctx, phi_k, norm_k_, 1.0f));
    MCSERVE_ASSIGN_OR_RETURN(Tensor o, NewF32(ctx, {t, hq_, dv_}));
    const LinearRule rule({.rule = kernels::LinearMemoryRule::kAdditive, .q = &phi_q, .k = &phi_k, .v = &v3,
                           .normalize = normalize_},
                          normalize_ ? "normalizer" : "");
    MCSERVE_RETURN_IF_ERROR(memory_.Run(ctx, x, rule, batch, state, &o));
    return output_.Run(ctx, x, o, out);
  }

 private:
  absl::Status NormalizeRowsIf(const Context& ctx, Tensor& x, bool sum_norm, float scale) const {
    if (sum_norm) return NormalizeRows(ctx, x, dphi_, /*l2=*/false, 1e-4f, scale);
    if (scale == 1.0f) return absl::OkStatus();
    return Activate(ctx, x, kernels::ActivationKind::kIdentity, scale);
  }

  int64_t hq_ = 0, hkv_ = 0, dk_ = 0, dv_ = 0, dphi_ = 0;
  FeatureMapKind kind_ = FeatureMapKind::kIdentity;
  bool norm_q_ = false, norm_k_ = false, normalize_ = false;
  Tensor q_proj_, k_proj_, v_proj_;  // [Hq·K, H], [Hkv·K, H], [Hkv·V, H]
  FeatureMapWeights phi_q_, phi_k_;
  MemoryStage memory_;
  GatedOutput output_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Mixer>> MakeLinearAttnMixer(const ModelConfig& c, const WeightBinder& w, int layer) {
  return LinearAttnMixer::Make(c, w, layer);
}

}  // namespace mcserve::engine
