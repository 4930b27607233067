#include "engine/runner/mixer_ops.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/gather_rows/gather_rows.h"
#include "kernels/l2_norm/l2_norm.h"
#include "kernels/linear/linear.h"
#include "kernels/rms_norm/rms_norm.h"
#include "kernels/short_conv/short_conv.h"

namespace mcserve::engine {

using kernels::Context;
using kernels::Tensor;

absl::StatusOr<Tensor> NewF32(const Context& ctx, kernels::Shape shape) {
  return Tensor::Zeros(kernels::DType::kF32, std::move(shape), ctx.device);
}

absl::StatusOr<Tensor> NewF32ForOverwrite(const Context& ctx, kernels::Shape shape) {
  return Tensor::ForOverwrite(kernels::DType::kF32, std::move(shape), ctx.device);
}

absl::StatusOr<Tensor> BroadcastRows(const Context& ctx, const Tensor& vec, int64_t rows) {
  MCSERVE_ASSIGN_OR_RETURN(Tensor table, vec.Reshape({1, vec.numel()}));
  MCSERVE_ASSIGN_OR_RETURN(Tensor zeros, Tensor::Zeros(kernels::DType::kI32, {rows}, ctx.device));
  MCSERVE_ASSIGN_OR_RETURN(Tensor out, NewF32ForOverwrite(ctx, {rows, vec.numel()}));
  MCSERVE_RETURN_IF_ERROR(kernels::GatherRows(ctx, {.table = &table, .ids = &zeros, .out = &out}));
  return out;
}

absl::StatusOr<Tensor> ExpandHeads(const Context& ctx, const Tensor& x, int64_t heads) {
  const int64_t t = x.dim(0), h = x.dim(1), d = x.dim(2);
  if (h == heads) return x;
  if (heads % h != 0) {
    return absl::InvalidArgumentError(absl::StrCat("cannot expand ", h, " heads to ", heads));
  }
  std::vector<int32_t> ids(t * heads);
  for (int64_t r = 0; r < t; ++r) {
    for (int64_t j = 0; j < heads; ++j) ids[r * heads + j] = static_cast<int32_t>(r * h + j / (heads / h));
  }
  MCSERVE_ASSIGN_OR_RETURN(Tensor ids_t, Tensor::FromHostI32(ids, {t * heads}, ctx.device));
  MCSERVE_ASSIGN_OR_RETURN(Tensor table, x.Reshape({t * h, d}));
  MCSERVE_ASSIGN_OR_RETURN(Tensor out, NewF32ForOverwrite(ctx, {t * heads, d}));
  MCSERVE_RETURN_IF_ERROR(kernels::GatherRows(ctx, {.table = &table, .ids = &ids_t, .out = &out}));
  return out.Reshape({t, heads, d});
}

absl::StatusOr<Tensor> GatherRows(const Context& ctx, const Tensor& t, std::span<const int32_t> rows) {
  const int64_t width = t.dim(0) == 0 ? 0 : t.numel() / t.dim(0), m = static_cast<int64_t>(rows.size());
  MCSERVE_ASSIGN_OR_RETURN(Tensor ids, Tensor::FromHostI32(rows, {m}, ctx.device));
  MCSERVE_ASSIGN_OR_RETURN(Tensor table, t.Reshape({t.dim(0), width}));
  MCSERVE_ASSIGN_OR_RETURN(Tensor out, NewF32ForOverwrite(ctx, {m, width}));
  MCSERVE_RETURN_IF_ERROR(kernels::GatherRows(ctx, {.table = &table, .ids = &ids, .out = &out}));
  kernels::Shape shape = t.shape();
  shape[0] = m;
  return out.Reshape(shape);
}

absl::StatusOr<Tensor> Project(const Context& ctx, const Tensor& x, const Tensor& w) {
  MCSERVE_ASSIGN_OR_RETURN(Tensor out, NewF32ForOverwrite(ctx, {x.dim(0), w.dim(0)}));
  MCSERVE_RETURN_IF_ERROR(kernels::Linear(ctx, {.x = &x, .w = &w, .out = &out}));
  return out;
}

absl::StatusOr<kernels::TensorList> ProjectMany(const Context& ctx, const Tensor& x,
                                               std::span<const Tensor* const> weights) {
  kernels::TensorList outs;
  outs.reserve(weights.size());  // the items point into it: no reallocation below
  absl::InlinedVector<kernels::LinearGroupItem, 8> items;
  for (const Tensor* w : weights) {
    MCSERVE_ASSIGN_OR_RETURN(Tensor out, NewF32ForOverwrite(ctx, {x.dim(0), w->dim(0)}));
    outs.push_back(std::move(out));
    items.push_back({.w = w, .out = &outs.back()});
  }
  MCSERVE_RETURN_IF_ERROR(kernels::LinearGroup(ctx, {.x = &x, .items = items}));
  return outs;
}

absl::StatusOr<ConvProjection> ConvProjection::Bind(const WeightBinder& w, const std::string& attn,
                                                    const std::string& name, int64_t dim, int64_t hidden,
                                                    bool use_conv, int64_t conv_size) {
  ConvProjection p;
  MCSERVE_ASSIGN_OR_RETURN(p.w, w.Matrix(absl::StrCat(attn, name, "_proj.weight"), {dim, hidden}));
  if (use_conv) {  // F32 at load: the conv reads its taps once per call, and widening them cost ~1 µs a call
    MCSERVE_ASSIGN_OR_RETURN(Tensor conv, w.Float(absl::StrCat(attn, name, "_conv1d.weight"), {dim, 1, conv_size}));
    if (conv.device() == kernels::Device::kCpu) {
      MCSERVE_ASSIGN_OR_RETURN(std::vector<float> weight, conv.ToHostF32());  // [D, 1, W]
      std::vector<float> taps(weight.size());                                 // [W, D]
      for (int64_t c = 0; c < dim; ++c) {
        for (int64_t j = 0; j < conv_size; ++j) taps[j * dim + c] = weight[c * conv_size + j];
      }
      MCSERVE_ASSIGN_OR_RETURN(p.taps, Tensor::FromHost(taps, {conv_size, dim}, kernels::Device::kCpu));
    }
    p.conv = std::move(conv);
  }
  p.state_name = absl::StrCat("conv_", name);
  return p;
}

void ConvProjection::AddStateSpec(int64_t conv_size, std::vector<StateSpec>* specs) const {
  if (conv) specs->push_back({state_name, {conv_size - 1, w.dim(0)}});
}

absl::StatusOr<Tensor> ConvProjection::Run(const Context& ctx, const Tensor& x, const kernels::BatchLayout& layout,
                                           LayerState& state, bool conv_silu) const {
  MCSERVE_ASSIGN_OR_RETURN(Tensor projected, Project(ctx, x, w));
  return RunProjected(ctx, std::move(projected), layout, state, conv_silu);
}

absl::StatusOr<Tensor> ConvProjection::RunProjected(const Context& ctx, Tensor projected,
                                                    const kernels::BatchLayout& layout, LayerState& state,
                                                    bool conv_silu) const {
  if (!conv) {
    if (act_without_conv != kernels::ActivationKind::kIdentity) {
      MCSERVE_RETURN_IF_ERROR(Activate(ctx, projected, act_without_conv));
    }
    return projected;
  }
  MCSERVE_ASSIGN_OR_RETURN(Tensor out, NewF32ForOverwrite(ctx, projected.shape()));
  MCSERVE_RETURN_IF_ERROR(kernels::ShortConv(ctx, {.x = &projected, .weight = &*conv, .silu = conv_silu,
                                                   .layout = layout, .state = &state.at(state_name),
                                                   .out = &out}));
  return out;
}

absl::Status NormalizeRows(const Context& ctx, Tensor& x, int64_t n, bool l2, float eps, float scale) {
  MCSERVE_ASSIGN_OR_RETURN(Tensor rows, x.Reshape({x.numel() / n, n}));
  return kernels::L2Norm(ctx, {.kind = l2 ? kernels::RowNormKind::kL2 : kernels::RowNormKind::kSum,
                               .x = &rows, .eps = eps, .scale = scale, .out = &rows});
}

absl::Status Activate(const Context& ctx, Tensor& x, kernels::ActivationKind kind, float scale) {
  return kernels::Activation(ctx, {.kind = kind, .x = &x, .scale = scale, .out = &x});
}

absl::Status OutputStage(const Context& ctx, Tensor& o, const Tensor& norm_weight, const Tensor* gate, float eps,
                         const Tensor& o_proj, Tensor* out) {
  const int64_t v = norm_weight.dim(0);
  MCSERVE_ASSIGN_OR_RETURN(Tensor rows, o.Reshape({o.numel() / v, v}));
  std::optional<Tensor> gate_rows;
  if (gate != nullptr) {
    MCSERVE_ASSIGN_OR_RETURN(gate_rows, gate->Reshape({gate->numel() / v, v}));
  }
  MCSERVE_RETURN_IF_ERROR(kernels::RmsNorm(ctx, {.x = &rows, .weight = &norm_weight,
                                                 .gate = gate_rows ? &*gate_rows : nullptr, .eps = eps,
                                                 .out = &rows}));
  MCSERVE_ASSIGN_OR_RETURN(Tensor merged, o.Reshape({o.dim(0), o.numel() / o.dim(0)}));
  return kernels::Linear(ctx, {.x = &merged, .w = &o_proj, .out = out});
}

}  // namespace mcserve::engine
