// SWLA, window c = 2 (docs/model-format.md): α decays the memory, β writes the previous token's
// pair, λ the current one.
#include "absl/strings/str_cat.h"
#include "engine/runner/mixer.h"
#include "engine/runner/qkv_pipeline.h"
#include "kernels/core/status_macros.h"
#include "kernels/gate/gate.h"
#include "kernels/linear_memory/linear_memory.h"

namespace mcserve::engine {
namespace {

using kernels::Context;
using kernels::Tensor;

class SwlaMixer : public Mixer {
 public:
  static absl::StatusOr<std::unique_ptr<Mixer>> Make(const ModelConfig& c, const WeightBinder& w, int layer) {
    auto m = std::make_unique<SwlaMixer>();
    const std::string attn = absl::StrCat("model.layers.", layer, ".attn.");
    const int64_t h = c.hidden_size;
    m->heads_ = c.num_heads;
    m->dk_ = c.head_k_dim;
    m->dv_ = c.head_v_dim;
    QkvOptions o{.q_heads = m->heads_, .v_heads = m->heads_, .dk = m->dk_, .dv = m->dv_,
                 .use_conv = c.use_short_conv, .conv_size = c.conv_size};
    MCSERVE_ASSIGN_OR_RETURN(m->qkv_, QkvPipeline::Bind(w, attn, h, o));
    MCSERVE_ASSIGN_OR_RETURN(m->a_proj_, w.Matrix(attn + "a_proj.weight", {m->heads_, h}));
    MCSERVE_ASSIGN_OR_RETURN(m->b_proj_, w.Matrix(attn + "b_proj.weight", {m->heads_, h}));
    MCSERVE_ASSIGN_OR_RETURN(m->l_proj_, w.Matrix(attn + "l_proj.weight", {m->heads_, h}));
    MCSERVE_ASSIGN_OR_RETURN(m->a_log_, w.Float(attn + "A_log", {m->heads_}));
    MCSERVE_ASSIGN_OR_RETURN(m->dt_bias_, w.Float(attn + "dt_bias", {m->heads_}));
    MCSERVE_ASSIGN_OR_RETURN(m->output_,
                             GatedOutput::Bind(w, attn, h, m->heads_, m->dv_, c.use_gate, c.norm_eps, "o_norm"));
    return m;
  }

  std::vector<StateSpec> StateSpecs() const override {
    std::vector<StateSpec> specs = {{"memory", {heads_, dk_, dv_}}, {"previous_kv", {heads_, dk_ + dv_}}};
    qkv_.AddStateSpecs(&specs);
    return specs;
  }

  absl::Status Forward(const Context& ctx, const Tensor& x, const kernels::BatchLayout& layout, LayerState& state,
                       Tensor* out) const override {
    const int64_t t = x.dim(0);
    MCSERVE_ASSIGN_OR_RETURN(QkvPipeline::Qkv qkv, qkv_.Run(ctx, x, layout, state));
    MCSERVE_ASSIGN_OR_RETURN(Tensor a, Project(ctx, x, a_proj_));
    MCSERVE_ASSIGN_OR_RETURN(Tensor alpha, NewF32(ctx, {t, heads_}));
    MCSERVE_RETURN_IF_ERROR(kernels::Gate(ctx, {.kind = kernels::GateKind::kSoftplusDecay, .x = &a,
                                                .a_log = &a_log_, .dt_bias = &dt_bias_, .out = &alpha}));
    MCSERVE_ASSIGN_OR_RETURN(Tensor beta, SigmoidGate(ctx, x, b_proj_));
    MCSERVE_ASSIGN_OR_RETURN(Tensor lambda, SigmoidGate(ctx, x, l_proj_));
    MCSERVE_ASSIGN_OR_RETURN(Tensor o, NewF32(ctx, {t, heads_, dv_}));
    MCSERVE_RETURN_IF_ERROR(kernels::LinearMemory(
        ctx, {.rule = kernels::LinearMemoryRule::kSwla, .q = &qkv.q, .k = &qkv.k, .v = &qkv.v, .decay = &alpha,
              .beta = &beta, .gamma = &lambda, .layout = layout, .state = &state.at("memory"),
              .aux = &state.at("previous_kv"), .out = &o}));
    return output_.Run(ctx, x, o, out);
  }

 private:
  int64_t heads_ = 0, dk_ = 0, dv_ = 0;
  QkvPipeline qkv_;
  Tensor a_proj_, b_proj_, l_proj_;  // [heads, H] each
  Tensor a_log_, dt_bias_;           // [heads]
  GatedOutput output_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Mixer>> MakeSwlaMixer(const ModelConfig& c, const WeightBinder& w, int layer) {
  return SwlaMixer::Make(c, w, layer);
}

}  // namespace mcserve::engine
