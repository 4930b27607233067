#include "kernels/layer_norm/layer_norm.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/core/dispatch.h"
#include "kernels/core/validate.h"

namespace mcserve::kernels {
namespace {

// weight / bias: F32 [n].
bool IsRowVector(const Tensor& t, int64_t n) { return t.dtype() == DType::kF32 && t.rank() == 1 && t.dim(0) == n; }

absl::Status Validate(const Context& ctx, const LayerNormArgs& a) {
  if (a.x == nullptr || a.weight == nullptr || a.bias == nullptr || a.out == nullptr) {
    return absl::InvalidArgumentError("LayerNorm: x, weight, bias and out are required");
  }
  MCSERVE_RETURN_IF_ERROR(CheckOnDevice("LayerNorm", ctx.device,
                                        {{"x", a.x}, {"weight", a.weight}, {"bias", a.bias}, {"out", a.out}}));
  const Tensor &x = *a.x, &out = *a.out;
  if (x.dtype() != DType::kF32 || x.rank() != 2 || !IsRowVector(*a.weight, x.dim(1)) ||
      !IsRowVector(*a.bias, x.dim(1)) || out.dtype() != DType::kF32 || out.shape() != x.shape()) {
    return absl::InvalidArgumentError(absl::StrCat("LayerNorm: x ", x.DebugString(), ", weight ",
                                                   a.weight->DebugString(), ", bias ", a.bias->DebugString(), ", out ",
                                                   out.DebugString(),
                                                   " (want x F32 [rows, n], weight and bias F32 [n], out like x)"));
  }
  MCSERVE_RETURN_IF_ERROR(CheckWritable("LayerNorm", "out", out));
  if (!(a.eps >= 0.0f) || !std::isfinite(a.eps)) {
    return absl::InvalidArgumentError(absl::StrCat("LayerNorm: eps ", a.eps, " must be finite and >= 0"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status LayerNorm(const Context& ctx, const LayerNormArgs& args) {
  MCSERVE_RETURN_IF_ERROR(Validate(ctx, args));
  return DispatchOp(ctx, "LayerNorm", &internal::LayerNormCpu, MCSERVE_CUDA_FN(internal::cuda::LayerNormCuda),
                    &internal::cuda_emu::LayerNormCuda, args);
}

}  // namespace mcserve::kernels
