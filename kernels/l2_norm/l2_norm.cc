#include "kernels/l2_norm/l2_norm.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "kernels/core/dispatch.h"
#include "base/status_macros.h"
#include "kernels/core/validate.h"

namespace mcserve::kernels {
namespace {

absl::Status Validate(const Context& ctx, const L2NormArgs& a) {
  if (a.kind != RowNormKind::kL2 && a.kind != RowNormKind::kSum) {
    return absl::InvalidArgumentError("L2Norm: unknown kind");
  }
  if (a.x == nullptr || a.out == nullptr) return absl::InvalidArgumentError("L2Norm: x and out are required");
  MCSERVE_RETURN_IF_ERROR(CheckOnDevice("L2Norm", ctx.device, {{"x", a.x}, {"out", a.out}}));
  const Tensor &x = *a.x, &out = *a.out;
  if (x.dtype() != DType::kF32 || x.rank() != 2 || out.dtype() != DType::kF32 || out.shape() != x.shape()) {
    return absl::InvalidArgumentError(absl::StrCat("L2Norm: x ", x.DebugString(), ", out ", out.DebugString(),
                                                   " (want F32 [rows, n] for both)"));
  }
  MCSERVE_RETURN_IF_ERROR(CheckWritable("L2Norm", "out", out));
  if (!std::isfinite(a.eps) || a.eps < 0.0f || !std::isfinite(a.scale)) {
    return absl::InvalidArgumentError(
        absl::StrCat("L2Norm: eps ", a.eps, " and scale ", a.scale, " must be finite, eps >= 0"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status L2Norm(const Context& ctx, const L2NormArgs& args) {
  MCSERVE_RETURN_IF_ERROR(Validate(ctx, args));
  return DispatchOp(ctx, "L2Norm", &internal::L2NormCpu, MCSERVE_CUDA_FN(internal::cuda::L2NormCuda),
                    &internal::cuda_emu::L2NormCuda, args);
}

}  // namespace mcserve::kernels
