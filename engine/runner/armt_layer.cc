#include "engine/runner/armt_layer.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/runner/mixer_ops.h"
#include "kernels/assoc_memory/assoc_memory.h"
#include "kernels/attention/attention.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/feature_map/feature_map.h"
#include "kernels/gather_rows/gather_rows.h"
#include "kernels/linear/linear.h"

namespace mcserve::engine {

using kernels::Context;
using kernels::Tensor;

namespace {

// x [T, n] += bias [n] broadcast over the rows.
absl::Status AddBias(const Context& ctx, Tensor& x, const Tensor& bias) {
  MCSERVE_ASSIGN_OR_RETURN(Tensor rows, BroadcastRows(ctx, bias, x.dim(0)));  // [T, n]
  return kernels::Add(ctx, {.a = &x, .b = &rows, .out = &x});
}

// x [T, D] · wᵀ + b → [T, out].
absl::StatusOr<Tensor> Affine(const Context& ctx, const Tensor& x, const Tensor& w, const Tensor& b) {
  MCSERVE_ASSIGN_OR_RETURN(Tensor y, Project(ctx, x, w));
  MCSERVE_RETURN_IF_ERROR(AddBias(ctx, y, b));
  return y;
}

// DPFP-3 of x [T, P] → [T, 6P].
absl::StatusOr<Tensor> Dpfp3(const Context& ctx, const Tensor& x) {
  const int64_t t = x.dim(0), p = x.dim(1);
  MCSERVE_ASSIGN_OR_RETURN(Tensor x3, x.Reshape({t, 1, p}));
  const int64_t f = kernels::FeatureMapOutDim(kernels::FeatureMapKind::kDpfp3, p);
  MCSERVE_ASSIGN_OR_RETURN(Tensor out, NewF32(ctx, {t, 1, f}));
  MCSERVE_RETURN_IF_ERROR(kernels::FeatureMap(ctx, {.kind = kernels::FeatureMapKind::kDpfp3, .x = &x3, .out = &out}));
  return out.Reshape({t, f});
}

}  // namespace

absl::StatusOr<ArmtLayer> ArmtLayer::Bind(const ModelConfig& c, const WeightBinder& w, int layer) {
  const ArmtConfig& a = c.armt;
  const int64_t d = c.hidden_size, inner = c.intermediate_size, p = a.d_mem;
  ArmtLayer l;
  l.d_ = d;
  l.heads_ = a.num_heads;
  l.head_dim_ = a.head_dim;
  l.feat_ = a.feat_dim;
  l.capacity_ = a.segment_size + a.num_mem_tokens;
  l.eps_ = c.norm_eps;
  l.correction_ = a.correction;
  const std::string h = absl::StrCat("memory_cell.model.transformer.h.", layer, ".");
  MCSERVE_ASSIGN_OR_RETURN(l.w_mq_, w.Matrix(h + "W_mq.weight", {p, d}));
  MCSERVE_ASSIGN_OR_RETURN(l.w_mk_, w.Matrix(h + "W_mk.weight", {p, d}));
  MCSERVE_ASSIGN_OR_RETURN(l.w_mv_, w.Matrix(h + "W_mv.weight", {d, d}));
  MCSERVE_ASSIGN_OR_RETURN(l.w_mb_, w.Matrix(h + "W_mb.weight", {1, d}));
  MCSERVE_ASSIGN_OR_RETURN(l.b_mb_, w.Float(h + "W_mb.bias", {1}));
  const std::string b = h + "layer.";
  MCSERVE_ASSIGN_OR_RETURN(l.ln_1_, Norm::BindLayerNorm(w, b + "ln_1.", d));
  MCSERVE_ASSIGN_OR_RETURN(l.ln_2_, Norm::BindLayerNorm(w, b + "ln_2.", d));
  MCSERVE_ASSIGN_OR_RETURN(Tensor qkv, w.Transposed(b + "attn.c_attn.weight", {d, 3 * d}));  // [3D, D]
  MCSERVE_ASSIGN_OR_RETURN(Tensor qkv_b, w.Float(b + "attn.c_attn.bias", {3 * d}));
  l.w_q_ = qkv.Rows(0, d);
  l.w_k_ = qkv.Rows(d, 2 * d);
  l.w_v_ = qkv.Rows(2 * d, 3 * d);
  l.b_q_ = qkv_b.Rows(0, d);
  l.b_k_ = qkv_b.Rows(d, 2 * d);
  l.b_v_ = qkv_b.Rows(2 * d, 3 * d);
  MCSERVE_ASSIGN_OR_RETURN(l.w_o_, w.Transposed(b + "attn.c_proj.weight", {d, d}));
  MCSERVE_ASSIGN_OR_RETURN(l.b_o_, w.Float(b + "attn.c_proj.bias", {d}));
  MCSERVE_ASSIGN_OR_RETURN(l.w_fc_, w.Transposed(b + "mlp.c_fc.weight", {d, inner}));
  MCSERVE_ASSIGN_OR_RETURN(l.b_fc_, w.Float(b + "mlp.c_fc.bias", {inner}));
  MCSERVE_ASSIGN_OR_RETURN(l.w_proj_, w.Transposed(b + "mlp.c_proj.weight", {inner, d}));
  MCSERVE_ASSIGN_OR_RETURN(l.b_proj_, w.Float(b + "mlp.c_proj.bias", {d}));
  return l;
}

std::vector<StateSpec> ArmtLayer::StateSpecs() const {
  return {{.name = "assoc_a", .per_slot = {feat_, d_}},
          {.name = "assoc_z", .per_slot = {feat_}},
          {.name = "k_cache", .per_slot = {capacity_, heads_, head_dim_}, .scratch = true},
          {.name = "v_cache", .per_slot = {capacity_, heads_, head_dim_}, .scratch = true}};
}

absl::Status ArmtLayer::Read(const Context& ctx, const ArmtRows& rows, LayerState& state, Tensor& h) const {
  MCSERVE_ASSIGN_OR_RETURN(Tensor q, Project(ctx, h, w_mq_));  // [T, P]
  MCSERVE_ASSIGN_OR_RETURN(Tensor fq, Dpfp3(ctx, q));           // [T, F]
  return kernels::AssocRead(ctx, {.fq = &fq, .layout = rows.layout, .a = &state.at("assoc_a"),
                                  .z = &state.at("assoc_z"), .h = &h});
}

absl::Status ArmtLayer::Attend(const Context& ctx, const ArmtRows& rows, LayerState& state, Tensor& h) const {
  const int64_t t = h.dim(0);
  MCSERVE_ASSIGN_OR_RETURN(Tensor u, NewF32(ctx, h.shape()));  // [T, D]
  MCSERVE_RETURN_IF_ERROR(ln_1_.Apply(ctx, h, eps_, u));
  MCSERVE_ASSIGN_OR_RETURN(Tensor q, Affine(ctx, u, w_q_, b_q_));  // [T, D]
  MCSERVE_ASSIGN_OR_RETURN(Tensor k, Affine(ctx, u, w_k_, b_k_));
  MCSERVE_ASSIGN_OR_RETURN(Tensor v, Affine(ctx, u, w_v_, b_v_));
  MCSERVE_ASSIGN_OR_RETURN(Tensor q3, q.Reshape({t, heads_, head_dim_}));
  MCSERVE_ASSIGN_OR_RETURN(Tensor k3, k.Reshape({t, heads_, head_dim_}));
  MCSERVE_ASSIGN_OR_RETURN(Tensor v3, v.Reshape({t, heads_, head_dim_}));
  MCSERVE_ASSIGN_OR_RETURN(Tensor o, NewF32(ctx, {t, heads_, head_dim_}));
  MCSERVE_RETURN_IF_ERROR(kernels::Attention(ctx, {.q = &q3, .k = &k3, .v = &v3, .cached = rows.cached,
                                                   .layout = rows.layout, .k_cache = &state.at("k_cache"),
                                                   .v_cache = &state.at("v_cache"), .out = &o}));
  MCSERVE_ASSIGN_OR_RETURN(Tensor merged, o.Reshape({t, d_}));
  MCSERVE_ASSIGN_OR_RETURN(Tensor proj, Affine(ctx, merged, w_o_, b_o_));  // [T, D]
  return kernels::Add(ctx, {.a = &h, .b = &proj, .out = &h});
}

absl::Status ArmtLayer::Mlp(const Context& ctx, Tensor& h) const {
  MCSERVE_ASSIGN_OR_RETURN(Tensor u, NewF32(ctx, h.shape()));  // [T, D]
  MCSERVE_RETURN_IF_ERROR(ln_2_.Apply(ctx, h, eps_, u));
  MCSERVE_ASSIGN_OR_RETURN(Tensor a, Affine(ctx, u, w_fc_, b_fc_));  // [T, I]
  MCSERVE_RETURN_IF_ERROR(Activate(ctx, a, kernels::ActivationKind::kGeluTanh));
  MCSERVE_ASSIGN_OR_RETURN(Tensor out, Affine(ctx, a, w_proj_, b_proj_));  // [T, D]
  return kernels::Add(ctx, {.a = &h, .b = &out, .out = &h});
}

absl::Status ArmtLayer::Write(const Context& ctx, const ArmtRows& rows, LayerState& state, const Tensor& h) const {
  const int64_t m = rows.close_rows->dim(0);
  MCSERVE_ASSIGN_OR_RETURN(Tensor o, NewF32(ctx, {m, d_}));  // [Mc, D] the memory rows' outputs
  MCSERVE_RETURN_IF_ERROR(kernels::GatherRows(ctx, {.table = &h, .ids = rows.close_rows, .out = &o}));
  MCSERVE_ASSIGN_OR_RETURN(Tensor k, Project(ctx, o, w_mk_));       // [Mc, P]
  MCSERVE_ASSIGN_OR_RETURN(Tensor fk, Dpfp3(ctx, k));               // [Mc, F]
  MCSERVE_ASSIGN_OR_RETURN(Tensor vn, Project(ctx, o, w_mv_));      // [Mc, D]
  MCSERVE_ASSIGN_OR_RETURN(Tensor beta2, Affine(ctx, o, w_mb_, b_mb_));  // [Mc, 1]
  MCSERVE_RETURN_IF_ERROR(Activate(ctx, beta2, kernels::ActivationKind::kSigmoid));
  MCSERVE_ASSIGN_OR_RETURN(Tensor beta, beta2.Reshape({m}));
  MCSERVE_ASSIGN_OR_RETURN(Tensor delta, NewF32(ctx, {m, d_}));
  MCSERVE_ASSIGN_OR_RETURN(Tensor gamma, NewF32(ctx, {m}));
  return kernels::AssocWrite(ctx, {.fk = &fk, .vn = &vn, .beta = &beta, .first = rows.close_first,
                                   .correction = correction_, .layout = rows.close_layout, .delta = &delta,
                                   .gamma = &gamma, .a = &state.at("assoc_a"), .z = &state.at("assoc_z")});
}

absl::Status ArmtLayer::Run(const Context& ctx, const ArmtRows& rows, LayerState& state, Tensor& h) const {
  MCSERVE_RETURN_IF_ERROR(Read(ctx, rows, state, h));
  MCSERVE_RETURN_IF_ERROR(Attend(ctx, rows, state, h));
  MCSERVE_RETURN_IF_ERROR(Mlp(ctx, h));
  if (!rows.any_close) return absl::OkStatus();
  return Write(ctx, rows, state, h);
}

}  // namespace mcserve::engine
