#include "kernels/linear/linear.h"

#include "absl/strings/str_cat.h"
#include "kernels/core/dispatch.h"

namespace mcserve::kernels {
namespace {

absl::Status Validate(const LinearArgs& a) {
  if (a.x == nullptr || a.w == nullptr || a.out == nullptr) {
    return absl::InvalidArgumentError("Linear: x, w and out are required");
  }
  const Tensor &x = *a.x, &w = *a.w, &out = *a.out;
  if (x.dtype() != DType::kF32 || out.dtype() != DType::kF32 || w.dtype() == DType::kI32 ||
      x.rank() != 2 || w.rank() != 2 || out.rank() != 2 || x.dim(1) != w.dim(1) ||
      out.dim(0) != x.dim(0) || out.dim(1) != w.dim(0)) {
    return absl::InvalidArgumentError(absl::StrCat("Linear: x ", x.DebugString(), ", w ", w.DebugString(),
                                                   ", out ", out.DebugString(),
                                                   " (want x F32 [m, in], w [out, in], out F32 [m, out])"));
  }
  if (x.device() != w.device() || x.device() != out.device()) {
    return absl::InvalidArgumentError("Linear: tensors on different devices");
  }
  if (out.read_only()) return absl::InvalidArgumentError("Linear: out is read-only");
  return absl::OkStatus();
}

}  // namespace

absl::Status Linear(const Context& ctx, const LinearArgs& args) {
  if (absl::Status s = Validate(args); !s.ok()) return s;
  return DispatchOp(ctx, "Linear", &internal::LinearCpu, MCSERVE_CUDA_FN(internal::cuda::LinearCuda),
                    &internal::cuda_emu::LinearCuda, args);
}

}  // namespace mcserve::kernels
