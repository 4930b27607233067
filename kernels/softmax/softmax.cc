#include "kernels/softmax/softmax.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/core/dispatch.h"
#include "kernels/core/validate.h"

namespace mcserve::kernels {
namespace {

absl::Status Validate(const Context& ctx, const SoftmaxArgs& a) {
  if (a.x == nullptr || a.out == nullptr) return absl::InvalidArgumentError("Softmax: x and out are required");
  MCSERVE_RETURN_IF_ERROR(CheckOnDevice("Softmax", ctx.device, {{"x", a.x}, {"out", a.out}}));
  if (a.x->dtype() != DType::kF32 || a.x->rank() != 2 || a.out->dtype() != DType::kF32 ||
      a.out->shape() != a.x->shape()) {
    return absl::InvalidArgumentError(absl::StrCat("Softmax: x ", a.x->DebugString(), ", out ", a.out->DebugString(),
                                                   " (want both F32 [rows, n])"));
  }
  return CheckWritable("Softmax", "out", *a.out);
}

}  // namespace

absl::Status Softmax(const Context& ctx, const SoftmaxArgs& args) {
  MCSERVE_RETURN_IF_ERROR(Validate(ctx, args));
  return DispatchOp(ctx, "Softmax", &internal::SoftmaxCpu, MCSERVE_CUDA_FN(internal::cuda::SoftmaxCuda),
                    &internal::cuda_emu::SoftmaxCuda, args);
}

}  // namespace mcserve::kernels
