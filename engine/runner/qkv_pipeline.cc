#include "engine/runner/qkv_pipeline.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace mcserve::engine {

using kernels::ActivationKind;
using kernels::Context;
using kernels::Tensor;

QkvOptions EqualHeadOptions(const ModelConfig& c) {
  return {.q_heads = c.num_heads, .v_heads = c.num_heads, .dk = c.head_k_dim, .dv = c.head_v_dim,
          .use_conv = c.use_short_conv, .conv_size = c.conv_size};
}

absl::StatusOr<QkvPipeline> QkvPipeline::Bind(const WeightBinder& w, const std::string& attn, int64_t hidden,
                                              const QkvOptions& o) {
  QkvPipeline p;
  p.options_ = o;
  const int64_t key_dim = o.q_heads * o.dk, value_dim = o.v_heads * o.dv;
  MCSERVE_ASSIGN_OR_RETURN(p.q_, ConvProjection::Bind(w, attn, "q", key_dim, hidden, o.use_conv, o.conv_size));
  MCSERVE_ASSIGN_OR_RETURN(p.k_, ConvProjection::Bind(w, attn, "k", key_dim, hidden, o.use_conv, o.conv_size));
  MCSERVE_ASSIGN_OR_RETURN(p.v_, ConvProjection::Bind(w, attn, "v", value_dim, hidden, o.use_conv, o.conv_size));
  // Without a conv, only SiLU is applied before the head split (fla); other activations come after.
  const ActivationKind qk_pre = o.qk_act == ActivationKind::kSilu ? ActivationKind::kSilu : ActivationKind::kIdentity;
  p.q_.act_without_conv = p.k_.act_without_conv = qk_pre;
  p.v_.act_without_conv = ActivationKind::kSilu;
  return p;
}

void QkvPipeline::AddStateSpecs(std::vector<StateSpec>* specs) const {
  for (const ConvProjection* p : {&q_, &k_, &v_}) p->AddStateSpec(options_.conv_size, specs);
}

absl::StatusOr<Tensor> QkvPipeline::RunQk(const Context& ctx, const ConvProjection& p, Tensor projected,
                                          const kernels::BatchLayout& layout, LayerState& state) const {
  const bool silu = options_.qk_act == ActivationKind::kSilu;
  MCSERVE_ASSIGN_OR_RETURN(Tensor y, p.RunProjected(ctx, std::move(projected), layout, state, /*conv_silu=*/silu));
  if (!silu && options_.qk_act != ActivationKind::kIdentity) {
    MCSERVE_RETURN_IF_ERROR(Activate(ctx, y, options_.qk_act));
  }
  return y;
}

absl::StatusOr<QkvPipeline::Qkv> QkvPipeline::Run(const Context& ctx, const Tensor& x,
                                                  const kernels::BatchLayout& layout, LayerState& state,
                                                  std::span<const Tensor* const> extra) const {
  const QkvOptions& o = options_;
  const int64_t t = x.dim(0);
  kernels::TensorPtrList weights = {&q_.w, &k_.w, &v_.w};
  weights.insert(weights.end(), extra.begin(), extra.end());
  MCSERVE_ASSIGN_OR_RETURN(kernels::TensorList projected, ProjectMany(ctx, x, weights));
  MCSERVE_ASSIGN_OR_RETURN(Tensor q, RunQk(ctx, q_, std::move(projected[0]), layout, state));
  MCSERVE_ASSIGN_OR_RETURN(Tensor k, RunQk(ctx, k_, std::move(projected[1]), layout, state));
  MCSERVE_ASSIGN_OR_RETURN(Tensor v, v_.RunProjected(ctx, std::move(projected[2]), layout, state));
  const float eps = o.qk_l2 ? 1e-6f : 0.0f;
  MCSERVE_RETURN_IF_ERROR(NormalizeRows(ctx, q, o.dk, o.qk_l2, eps, o.scale_q ? QueryScale(o.dk) : 1.0f));
  MCSERVE_RETURN_IF_ERROR(NormalizeRows(ctx, k, o.dk, o.qk_l2, eps, 1.0f));
  Qkv out;
  MCSERVE_ASSIGN_OR_RETURN(out.q, q.Reshape({t, o.q_heads, o.dk}));
  MCSERVE_ASSIGN_OR_RETURN(out.k, k.Reshape({t, o.q_heads, o.dk}));
  MCSERVE_ASSIGN_OR_RETURN(out.v, v.Reshape({t, o.v_heads, o.dv}));
  out.extra.assign(std::make_move_iterator(projected.begin() + 3), std::make_move_iterator(projected.end()));
  return out;
}

absl::StatusOr<GatedOutput> GatedOutput::Bind(const WeightBinder& w, const std::string& attn, int64_t hidden,
                                              int64_t heads, int64_t dv, bool use_gate, float eps,
                                              const std::string& norm_name) {
  GatedOutput g;
  g.eps_ = eps;
  if (use_gate) {
    MCSERVE_ASSIGN_OR_RETURN(Tensor gp, w.Matrix(attn + "g_proj.weight", {heads * dv, hidden}));
    g.g_proj_ = std::move(gp);
  }
  MCSERVE_ASSIGN_OR_RETURN(g.norm_, w.Float(attn + norm_name + ".weight", {dv}));
  MCSERVE_ASSIGN_OR_RETURN(g.o_proj_, w.Matrix(attn + "o_proj.weight", {hidden, heads * dv}));
  return g;
}

absl::Status GatedOutput::Run(const Context& ctx, const Tensor& x, Tensor& o, Tensor* out) const {
  std::optional<Tensor> gate;
  if (g_proj_) {
    MCSERVE_ASSIGN_OR_RETURN(gate, Project(ctx, x, *g_proj_));
  }
  return RunProjected(ctx, gate ? &*gate : nullptr, o, out);
}

absl::Status GatedOutput::RunProjected(const Context& ctx, const Tensor* gate, Tensor& o, Tensor* out) const {
  return OutputStage(ctx, o, norm_, gate, eps_, o_proj_, out);
}

absl::StatusOr<DeltaStyleCore> DeltaStyleCore::Bind(const ModelConfig& c, const WeightBinder& w, int layer,
                                                    const QkvOptions& dims, MemoryStage::Aux aux) {
  DeltaStyleCore core;
  core.attn = absl::StrCat("model.layers.", layer, ".attn.");
  core.dims = dims;
  MCSERVE_ASSIGN_OR_RETURN(core.qkv, QkvPipeline::Bind(w, core.attn, c.hidden_size, dims));
  MCSERVE_ASSIGN_OR_RETURN(core.memory, MemoryStage::Bind(c, w, layer,
                                                          {.q_heads = dims.q_heads, .k_heads = dims.q_heads,
                                                           .state_heads = dims.v_heads, .dk = dims.dk, .dv = dims.dv},
                                                          std::move(aux), /*normalized=*/false));
  MCSERVE_ASSIGN_OR_RETURN(core.output, GatedOutput::Bind(w, core.attn, c.hidden_size, dims.v_heads, dims.dv,
                                                          c.use_gate, c.norm_eps, "o_norm"));
  return core;
}

std::vector<StateSpec> DeltaStyleCore::StateSpecs(std::vector<StateSpec> extra) const {
  std::vector<StateSpec> specs = {{"memory", {dims.v_heads, dims.dk, dims.dv}}};
  specs.insert(specs.end(), extra.begin(), extra.end());
  qkv.AddStateSpecs(&specs);
  memory.AddStateSpecs(&specs);
  return specs;
}

absl::StatusOr<DeltaStyleCore::Inputs> DeltaStyleCore::Project(const Context& ctx, const Tensor& x,
                                                               const MixerBatch& batch, LayerState& state,
                                                               kernels::TensorPtrList gates) const {
  const Tensor* g_proj = output.gate_weight();
  if (g_proj != nullptr) gates.push_back(g_proj);
  Inputs in;
  MCSERVE_ASSIGN_OR_RETURN(in.qkv, qkv.Run(ctx, x, batch.layout, state, gates));
  if (g_proj != nullptr) {
    in.gate = std::move(in.qkv.extra.back());
    in.qkv.extra.pop_back();
  }
  return in;
}

absl::Status DeltaStyleCore::Finish(const Context& ctx, const Tensor& x, const Inputs& inputs, const MemoryRule& rule,
                                    const MixerBatch& batch, LayerState& state, Tensor* out) const {
  MCSERVE_ASSIGN_OR_RETURN(Tensor o, NewF32(ctx, {x.dim(0), dims.v_heads, dims.dv}));
  MCSERVE_RETURN_IF_ERROR(memory.Run(ctx, x, rule, batch, state, &o));
  return output.RunProjected(ctx, inputs.gate ? &*inputs.gate : nullptr, o, out);
}

absl::StatusOr<Tensor> SigmoidGate(const Context& ctx, const Tensor& x, const Tensor& w, float scale) {
  MCSERVE_ASSIGN_OR_RETURN(Tensor g, Project(ctx, x, w));
  return SigmoidGate(ctx, std::move(g), scale);
}

absl::StatusOr<Tensor> SigmoidGate(const Context& ctx, Tensor projected, float scale) {
  MCSERVE_RETURN_IF_ERROR(Activate(ctx, projected, ActivationKind::kSigmoid, scale));
  return projected;
}

}  // namespace mcserve::engine
