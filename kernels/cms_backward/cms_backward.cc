#include "kernels/cms_backward/cms_backward.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/core/dispatch.h"
#include "kernels/core/validate.h"

namespace mcserve::kernels {
namespace {

// Whether t is F32 of exactly `shape`.
bool IsF32(const Tensor* t, const Shape& shape) { return t != nullptr && t->dtype() == DType::kF32 && t->shape() == shape; }

absl::Status ShapeError(const char* op, const Tensor* t, const char* name, const char* want) {
  return absl::InvalidArgumentError(
      absl::StrCat(op, ": ", name, " ", t == nullptr ? "missing" : t->DebugString(), " (want ", want, ")"));
}

absl::Status ValidateRms(const Context& ctx, const RmsNormBackwardArgs& a) {
  if (a.x == nullptr || a.x->dtype() != DType::kF32 || a.x->rank() != 2) return ShapeError("RmsNormBackward", a.x, "x", "F32 [rows, n]");
  const Shape& s = a.x->shape();
  if (!IsF32(a.weight, {s[1]})) return ShapeError("RmsNormBackward", a.weight, "weight", "F32 [n]");
  if (!IsF32(a.dy, s)) return ShapeError("RmsNormBackward", a.dy, "dy", "F32 [rows, n]");
  if (!IsF32(a.dx, s)) return ShapeError("RmsNormBackward", a.dx, "dx", "F32 [rows, n]");
  if (!std::isfinite(a.eps) || a.eps < 0.0f) return absl::InvalidArgumentError("RmsNormBackward: eps must be finite, >= 0");
  MCSERVE_RETURN_IF_ERROR(CheckOnDevice("RmsNormBackward", ctx.device,
                                        {{"x", a.x}, {"weight", a.weight}, {"dy", a.dy}, {"dx", a.dx}}));
  return CheckWritable("RmsNormBackward", "dx", *a.dx);
}

absl::Status ValidateXent(const Context& ctx, const XentGradArgs& a) {
  if (a.logits == nullptr || a.logits->dtype() != DType::kF32 || a.logits->rank() != 2 || a.logits->dim(1) < 1) {
    return ShapeError("XentGrad", a.logits, "logits", "F32 [rows, vocab ≥ 1]");
  }
  const Shape& s = a.logits->shape();
  if (a.targets == nullptr || a.targets->dtype() != DType::kI32 || a.targets->shape() != Shape{s[0]}) {
    return ShapeError("XentGrad", a.targets, "targets", "I32 [rows]");
  }
  if (!IsF32(a.grad, s)) return ShapeError("XentGrad", a.grad, "grad", "F32 [rows, vocab]");
  MCSERVE_RETURN_IF_ERROR(
      CheckOnDevice("XentGrad", ctx.device, {{"logits", a.logits}, {"targets", a.targets}, {"grad", a.grad}}));
  return CheckWritable("XentGrad", "grad", *a.grad);
}

absl::Status ValidateGlu(const Context& ctx, const GluBackwardArgs& a) {
  if (a.up == nullptr || a.up->dtype() != DType::kF32 || a.up->rank() != 2) return ShapeError("GluBackward", a.up, "up", "F32 [rows, n]");
  const Shape& s = a.up->shape();
  if (!IsF32(a.dm, s)) return ShapeError("GluBackward", a.dm, "dm", "F32 [rows, n]");
  if (!IsF32(a.dup, s)) return ShapeError("GluBackward", a.dup, "dup", "F32 [rows, n]");
  if ((a.gate == nullptr) != (a.dgate == nullptr)) {
    return absl::InvalidArgumentError("GluBackward: gate and dgate are given together (SwiGLU) or not at all (GELU)");
  }
  if (a.gate != nullptr && !IsF32(a.gate, s)) return ShapeError("GluBackward", a.gate, "gate", "F32 [rows, n]");
  if (a.dgate != nullptr && !IsF32(a.dgate, s)) return ShapeError("GluBackward", a.dgate, "dgate", "F32 [rows, n]");
  MCSERVE_RETURN_IF_ERROR(CheckOnDevice("GluBackward", ctx.device,
                                        {{"gate", a.gate}, {"up", a.up}, {"dm", a.dm}, {"dgate", a.dgate}, {"dup", a.dup}}));
  if (a.dgate != nullptr) MCSERVE_RETURN_IF_ERROR(CheckWritable("GluBackward", "dgate", *a.dgate));
  return CheckWritable("GluBackward", "dup", *a.dup);
}

absl::Status ValidateTranspose(const Context& ctx, const TransposeArgs& a) {
  if (a.x == nullptr || a.x->dtype() != DType::kF32 || a.x->rank() != 2) return ShapeError("Transpose", a.x, "x", "F32 [a, b]");
  if (!IsF32(a.out, {a.x->dim(1), a.x->dim(0)})) return ShapeError("Transpose", a.out, "out", "F32 [b, a]");
  MCSERVE_RETURN_IF_ERROR(CheckOnDevice("Transpose", ctx.device, {{"x", a.x}, {"out", a.out}}));
  return CheckWritable("Transpose", "out", *a.out);
}

}  // namespace

absl::Status RmsNormBackward(const Context& ctx, const RmsNormBackwardArgs& args) {
  MCSERVE_RETURN_IF_ERROR(ValidateRms(ctx, args));
  return DispatchOp(ctx, "RmsNormBackward", &internal::RmsNormBackwardCpu,
                    MCSERVE_CUDA_FN(internal::cuda::RmsNormBackwardCuda), &internal::cuda_emu::RmsNormBackwardCuda, args);
}

absl::Status XentGrad(const Context& ctx, const XentGradArgs& args) {
  MCSERVE_RETURN_IF_ERROR(ValidateXent(ctx, args));
  return DispatchOp(ctx, "XentGrad", &internal::XentGradCpu, MCSERVE_CUDA_FN(internal::cuda::XentGradCuda),
                    &internal::cuda_emu::XentGradCuda, args);
}

absl::Status GluBackward(const Context& ctx, const GluBackwardArgs& args) {
  MCSERVE_RETURN_IF_ERROR(ValidateGlu(ctx, args));
  return DispatchOp(ctx, "GluBackward", &internal::GluBackwardCpu, MCSERVE_CUDA_FN(internal::cuda::GluBackwardCuda),
                    &internal::cuda_emu::GluBackwardCuda, args);
}

absl::Status Transpose(const Context& ctx, const TransposeArgs& args) {
  MCSERVE_RETURN_IF_ERROR(ValidateTranspose(ctx, args));
  return DispatchOp(ctx, "Transpose", &internal::TransposeCpu, MCSERVE_CUDA_FN(internal::cuda::TransposeCuda),
                    &internal::cuda_emu::TransposeCuda, args);
}

}  // namespace mcserve::kernels
