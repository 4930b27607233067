#include "kernels/l2_norm/l2_norm.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "kernels/core/dispatch.h"

namespace mcserve::kernels {
namespace {

absl::Status Validate(const L2NormArgs& a) {
  if (a.kind != RowNormKind::kL2 && a.kind != RowNormKind::kSum) {
    return absl::InvalidArgumentError("L2Norm: unknown kind");
  }
  if (a.x == nullptr || a.out == nullptr) return absl::InvalidArgumentError("L2Norm: x and out are required");
  const Tensor &x = *a.x, &out = *a.out;
  if (x.dtype() != DType::kF32 || x.rank() != 2 || out.dtype() != DType::kF32 || out.shape() != x.shape()) {
    return absl::InvalidArgumentError(absl::StrCat("L2Norm: x ", x.DebugString(), ", out ", out.DebugString(),
                                                   " (want F32 [rows, n] for both)"));
  }
  if (x.device() != out.device()) return absl::InvalidArgumentError("L2Norm: tensors on different devices");
  if (out.read_only()) return absl::InvalidArgumentError("L2Norm: out is read-only");
  if (!std::isfinite(a.eps) || a.eps < 0.0f || !std::isfinite(a.scale)) {
    return absl::InvalidArgumentError(
        absl::StrCat("L2Norm: eps ", a.eps, " and scale ", a.scale, " must be finite, eps >= 0"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status L2Norm(const Context& ctx, const L2NormArgs& args) {
  if (absl::Status s = Validate(args); !s.ok()) return s;
  return DispatchOp(ctx, "L2Norm", &internal::L2NormCpu, MCSERVE_CUDA_FN(internal::cuda::L2NormCuda),
                    &internal::cuda_emu::L2NormCuda, args);
}

}  // namespace mcserve::kernels
