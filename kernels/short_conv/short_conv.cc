#include "kernels/short_conv/short_conv.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/core/tensor_data.h"
#include "kernels/core/dispatch.h"
#include "kernels/core/validate.h"

namespace mcserve::kernels {

absl::Status ValidateShortConv(const Context& ctx, const ShortConvArgs& a) {
  if (a.x == nullptr || a.weight == nullptr || a.state == nullptr || a.out == nullptr) {
    return absl::InvalidArgumentError("ShortConv: x, weight, state and out are required");
  }
  MCSERVE_RETURN_IF_ERROR(CheckOnDevice(
      "ShortConv", ctx.device,
      {{"x", a.x}, {"weight", a.weight}, {"bias", a.bias}, {"state", a.state}, {"out", a.out}}));
  const Tensor &x = *a.x, &w = *a.weight, &state = *a.state, &out = *a.out;
  if (x.dtype() != DType::kF32 || x.rank() != 2) {
    return absl::InvalidArgumentError(absl::StrCat("ShortConv: x ", x.DebugString(), " (want F32 [T, D])"));
  }
  const int64_t t = x.dim(0), d = x.dim(1);
  if (!IsFloatDType(w.dtype()) || w.rank() != 3 || w.dim(0) != d || w.dim(1) != 1 || w.dim(2) < 1) {
    return absl::InvalidArgumentError(absl::StrCat("ShortConv: weight ", w.DebugString(), " for x ",
                                                   x.DebugString(), " (want F32|BF16|F16 [D, 1, W], W >= 1)"));
  }
  const int64_t width = w.dim(2);
  if (a.bias != nullptr && (!IsFloatDType(a.bias->dtype()) || a.bias->rank() != 1 || a.bias->dim(0) != d)) {
    return absl::InvalidArgumentError(
        absl::StrCat("ShortConv: bias ", a.bias->DebugString(), " (want [", d, "])"));
  }
  if (state.dtype() != DType::kF32 || state.rank() != 3 || state.dim(1) != width - 1 || state.dim(2) != d) {
    return absl::InvalidArgumentError(absl::StrCat("ShortConv: state ", state.DebugString(), " (want F32 [num_slots, ",
                                                   width - 1, ", ", d, "])"));
  }
  if (out.dtype() != DType::kF32 || out.rank() != 2 || out.dim(0) != t || out.dim(1) != d) {
    return absl::InvalidArgumentError(
        absl::StrCat("ShortConv: out ", out.DebugString(), " (want F32 [", t, ", ", d, "])"));
  }
  MCSERVE_RETURN_IF_ERROR(CheckWritable("ShortConv", "state", state));
  MCSERVE_RETURN_IF_ERROR(CheckWritable("ShortConv", "out", out));
  if (t > 0 && RawData(out) == RawData(x)) {
    return absl::InvalidArgumentError("ShortConv: out must not alias x");
  }
  return ValidateBatchLayout("ShortConv", a.layout, t, state.dim(0), ctx.device);
}

absl::Status ShortConv(const Context& ctx, const ShortConvArgs& args) {
  MCSERVE_RETURN_IF_ERROR(ValidateShortConv(ctx, args));
  return DispatchOp(ctx, "ShortConv", &internal::ShortConvCpu, MCSERVE_CUDA_FN(internal::cuda::ShortConvCuda),
                    &internal::cuda_emu::ShortConvCuda, args);
}

}  // namespace mcserve::kernels
