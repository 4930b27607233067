// Titans with a linear memory (docs/model-format.md): gradient step on ‖Mᵀk − v‖² with momentum η,
// step size θ and retention α.
#include "engine/mc/linear_rule.h"
#include "engine/runner/mixer.h"
#include "engine/runner/qkv_pipeline.h"
#include "base/status_macros.h"

namespace mcserve::engine {
namespace {

using kernels::Context;
using kernels::Tensor;

class TitansMixer : public Mixer {
 public:
  static absl::StatusOr<std::unique_ptr<Mixer>> Make(const ModelConfig& c, const WeightBinder& w, int layer) {
    auto m = std::make_unique<TitansMixer>();
    const int64_t h = c.hidden_size, heads = c.num_heads;
    MCSERVE_ASSIGN_OR_RETURN(m->core_, DeltaStyleCore::Bind(c, w, layer, EqualHeadOptions(c), {.name = "momentum",
                                          .per_slot = {c.num_heads, c.head_k_dim, c.head_v_dim},
                                          .reset_at_segment_start = c.memory_caching &&
                                                                    c.memory_caching->init_mode == McInitMode::kIndependent}));
    const std::string& attn = m->core_.attn;
    MCSERVE_ASSIGN_OR_RETURN(m->a_proj_, w.Matrix(attn + "a_proj.weight", {heads, h}));
    MCSERVE_ASSIGN_OR_RETURN(m->m_proj_, w.Matrix(attn + "m_proj.weight", {heads, h}));
    MCSERVE_ASSIGN_OR_RETURN(m->b_proj_, w.Matrix(attn + "b_proj.weight", {heads, h}));
    return m;
  }

  std::vector<StateSpec> StateSpecs() const override {
    return core_.StateSpecs({{"momentum", {core_.dims.v_heads, core_.dims.dk, core_.dims.dv}}});
  }

  absl::Status Forward(const Context& ctx, const Tensor& x, const MixerBatch& batch, LayerState& state,
                       Tensor* out) const override {
    MCSERVE_ASSIGN_OR_RETURN(DeltaStyleCore::Inputs in,
                             core_.Project(ctx, x, batch, state, {&a_proj_, &m_proj_, &b_proj_}));
    const QkvPipeline::Qkv& qkv = in.qkv;
    MCSERVE_ASSIGN_OR_RETURN(Tensor alpha, SigmoidGate(ctx, std::move(in.qkv.extra[0])));  // retention
    MCSERVE_ASSIGN_OR_RETURN(Tensor eta, SigmoidGate(ctx, std::move(in.qkv.extra[1])));    // momentum
    MCSERVE_ASSIGN_OR_RETURN(Tensor theta, SigmoidGate(ctx, std::move(in.qkv.extra[2])));  // step size
    const LinearRule rule({.rule = kernels::LinearMemoryRule::kTitans, .q = &qkv.q, .k = &qkv.k, .v = &qkv.v,
                           .decay = &alpha, .beta = &theta, .gamma = &eta},
                          "momentum");
    return core_.Finish(ctx, x, in, rule, batch, state, out);
  }

 private:
  DeltaStyleCore core_;
  Tensor a_proj_, m_proj_, b_proj_;  // [heads, H] each
};

}  // namespace

absl::StatusOr<std::unique_ptr<Mixer>> MakeTitansMixer(const ModelConfig& c, const WeightBinder& w, int layer) {
  return TitansMixer::Make(c, w, layer);
}

}  // namespace mcserve::engine
