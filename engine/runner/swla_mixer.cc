// SWLA, window c = 2 (docs/model-format.md): α decays the memory, β writes the previous token's
// pair, λ the current one.
#include "engine/mc/linear_rule.h"
#include "engine/runner/mixer.h"
#include "engine/runner/qkv_pipeline.h"
#include "base/status_macros.h"
#include "kernels/gate/gate.h"

namespace mcserve::engine {
namespace {

using kernels::Context;
using kernels::Tensor;

class SwlaMixer : public Mixer {
 public:
  static absl::StatusOr<std::unique_ptr<Mixer>> Make(const ModelConfig& c, const WeightBinder& w, int layer) {
    auto m = std::make_unique<SwlaMixer>();
    const int64_t h = c.hidden_size, heads = c.num_heads;
    MCSERVE_ASSIGN_OR_RETURN(m->core_, DeltaStyleCore::Bind(
                                           c, w, layer, EqualHeadOptions(c),
                                           {.name = "previous_kv",
                                            .per_slot = {c.num_heads, c.head_k_dim + c.head_v_dim},
                                            .reset_at_segment_start = c.memory_caching &&
                                                                      !c.memory_caching->SwlaCrossBoundary()}));
    const std::string& attn = m->core_.attn;
    MCSERVE_ASSIGN_OR_RETURN(m->a_proj_, w.Matrix(attn + "a_proj.weight", {heads, h}));
    MCSERVE_ASSIGN_OR_RETURN(m->b_proj_, w.Matrix(attn + "b_proj.weight", {heads, h}));
    MCSERVE_ASSIGN_OR_RETURN(m->l_proj_, w.Matrix(attn + "l_proj.weight", {heads, h}));
    MCSERVE_ASSIGN_OR_RETURN(m->a_log_, w.Float(attn + "A_log", {heads}));
    MCSERVE_ASSIGN_OR_RETURN(m->dt_bias_, w.Float(attn + "dt_bias", {heads}));
    return m;
  }

  std::vector<StateSpec> StateSpecs() const override {
    return core_.StateSpecs({{"previous_kv", {core_.dims.v_heads, core_.dims.dk + core_.dims.dv}}});
  }

  absl::Status Forward(const Context& ctx, const Tensor& x, const MixerBatch& batch, LayerState& state,
                       Tensor* out) const override {
    MCSERVE_ASSIGN_OR_RETURN(DeltaStyleCore::Inputs in,
                             core_.Project(ctx, x, batch, state, {&a_proj_, &b_proj_, &l_proj_}));
    const QkvPipeline::Qkv& qkv = in.qkv;
    const Tensor& a = qkv.extra[0];  // [T, heads] a_proj x
    MCSERVE_ASSIGN_OR_RETURN(Tensor alpha, NewF32(ctx, a.shape()));
    MCSERVE_RETURN_IF_ERROR(kernels::Gate(ctx, {.kind = kernels::GateKind::kSoftplusDecay, .x = &a,
                                                .a_log = &a_log_, .dt_bias = &dt_bias_, .out = &alpha}));
    MCSERVE_ASSIGN_OR_RETURN(Tensor beta, SigmoidGate(ctx, std::move(in.qkv.extra[1])));
    MCSERVE_ASSIGN_OR_RETURN(Tensor lambda, SigmoidGate(ctx, std::move(in.qkv.extra[2])));
    const LinearRule rule({.rule = kernels::LinearMemoryRule::kSwla, .q = &qkv.q, .k = &qkv.k, .v = &qkv.v,
                           .decay = &alpha, .beta = &beta, .gamma = &lambda},
                          "previous_kv");
    return core_.Finish(ctx, x, in, rule, batch, state, out);
  }

 private:
  DeltaStyleCore core_;
  Tensor a_proj_, b_proj_, l_proj_;  // [heads, H] each
  Tensor a_log_, dt_bias_;           // [heads]
};

}  // namespace

absl::StatusOr<std::unique_ptr<Mixer>> MakeSwlaMixer(const ModelConfig& c, const WeightBinder& w, int layer) {
  return SwlaMixer::Make(c, w, layer);
}

}  // namespace mcserve::engine
