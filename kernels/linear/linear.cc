#include "kernels/linear/linear.h"

#include "absl/strings/str_cat.h"
#include "kernels/core/dispatch.h"
#include "base/status_macros.h"
#include "kernels/core/validate.h"

namespace mcserve::kernels {
namespace {

absl::Status Validate(const Context& ctx, const LinearArgs& a) {
  if (a.x == nullptr || a.w == nullptr || a.out == nullptr) {
    return absl::InvalidArgumentError("Linear: x, w and out are required");
  }
  MCSERVE_RETURN_IF_ERROR(CheckOnDevice("Linear", ctx.device, {{"x", a.x}, {"w", a.w}, {"out", a.out}}));
  const Tensor &x = *a.x, &w = *a.w, &out = *a.out;
  if (x.dtype() != DType::kF32 || out.dtype() != DType::kF32 || w.dtype() == DType::kI32 ||
      x.rank() != 2 || w.rank() != 2 || out.rank() != 2 || x.dim(1) != w.dim(1) ||
      out.dim(0) != x.dim(0) || out.dim(1) != w.dim(0)) {
    return absl::InvalidArgumentError(absl::StrCat("Linear: x ", x.DebugString(), ", w ", w.DebugString(),
                                                   ", out ", out.DebugString(),
                                                   " (want x F32 [m, in], w [out, in], out F32 [m, out])"));
  }
  return CheckWritable("Linear", "out", out);
}

// Each item as a Linear of its own, on the device's backend (CUDA: one launch per item).
absl::Status LinearEachItem(const Context& ctx, const LinearGroupArgs& args) {
  for (const LinearGroupItem& item : args.items) {
    MCSERVE_RETURN_IF_ERROR(Linear(ctx, {.x = args.x, .w = item.w, .out = item.out}));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status LinearGroup(const Context& ctx, const LinearGroupArgs& args) {
  if (args.items.empty()) return absl::InvalidArgumentError("LinearGroup: no items");
  for (const LinearGroupItem& item : args.items) {
    MCSERVE_RETURN_IF_ERROR(Validate(ctx, {.x = args.x, .w = item.w, .out = item.out}));
  }
  if (ctx.device != Device::kCpu) return LinearEachItem(ctx, args);
  return internal::LinearGroupCpu(ctx, args);
}

absl::Status Linear(const Context& ctx, const LinearArgs& args) {
  MCSERVE_RETURN_IF_ERROR(Validate(ctx, args));
  return DispatchOp(ctx, "Linear", &internal::LinearCpu, MCSERVE_CUDA_FN(internal::cuda::LinearCuda),
                    &internal::cuda_emu::LinearCuda, args);
}

}  // namespace mcserve::kernels
