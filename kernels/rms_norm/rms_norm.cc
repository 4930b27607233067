#include "kernels/rms_norm/rms_norm.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "kernels/core/dispatch.h"
#include "base/status_macros.h"
#include "kernels/core/validate.h"

namespace mcserve::kernels {
namespace {

absl::Status Validate(const Context& ctx, const RmsNormArgs& a) {
  if (a.x == nullptr || a.weight == nullptr || a.out == nullptr) {
    return absl::InvalidArgumentError("RmsNorm: x, weight and out are required");
  }
  MCSERVE_RETURN_IF_ERROR(CheckOnDevice("RmsNorm", ctx.device,
                                        {{"x", a.x}, {"weight", a.weight}, {"gate", a.gate}, {"out", a.out}}));
  const Tensor &x = *a.x, &w = *a.weight, &out = *a.out;
  if (x.dtype() != DType::kF32 || x.rank() != 2 || !IsFloatDType(w.dtype()) || w.rank() != 1 ||
      w.dim(0) != x.dim(1) || out.dtype() != DType::kF32 || out.shape() != x.shape()) {
    return absl::InvalidArgumentError(absl::StrCat("RmsNorm: x ", x.DebugString(), ", weight ", w.DebugString(),
                                                   ", out ", out.DebugString(),
                                                   " (want x F32 [rows, n], weight [n], out F32 [rows, n])"));
  }
  if (a.gate != nullptr && (a.gate->dtype() != DType::kF32 || a.gate->shape() != x.shape())) {
    return absl::InvalidArgumentError(
        absl::StrCat("RmsNorm: gate ", a.gate->DebugString(), " (want F32 like x ", x.DebugString(), ")"));
  }
  MCSERVE_RETURN_IF_ERROR(CheckWritable("RmsNorm", "out", out));
  if (!(a.eps >= 0.0f) || !std::isfinite(a.eps)) {
    return absl::InvalidArgumentError(absl::StrCat("RmsNorm: eps ", a.eps, " must be finite and >= 0"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RmsNorm(const Context& ctx, const RmsNormArgs& args) {
  MCSERVE_RETURN_IF_ERROR(Validate(ctx, args));
  return DispatchOp(ctx, "RmsNorm", &internal::RmsNormCpu, MCSERVE_CUDA_FN(internal::cuda::RmsNormCuda),
                    &internal::cuda_emu::RmsNormCuda, args);
}

}  // namespace mcserve::kernels
