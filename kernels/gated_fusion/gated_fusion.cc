#include "kernels/gated_fusion/gated_fusion.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/core/dispatch.h"
#include "kernels/core/validate.h"

namespace mcserve::kernels {
namespace {

bool IsF32(const Tensor* t, const Shape& shape) { return t != nullptr && t->dtype() == DType::kF32 && t->shape() == shape; }

absl::Status Validate(const Context& ctx, const GatedFusionArgs& a) {
  if (a.gate == nullptr || a.local == nullptr || a.global == nullptr || a.out == nullptr) {
    return absl::InvalidArgumentError("GatedFusion: gate, local, global and out are required");
  }
  MCSERVE_RETURN_IF_ERROR(CheckOnDevice(
      "GatedFusion", ctx.device,
      {{"gate", a.gate}, {"gate_bias", a.gate_bias}, {"local", a.local}, {"global", a.global}, {"out", a.out}}));
  const Tensor& l = *a.local;
  if (l.dtype() != DType::kF32 || l.rank() != 2 || !IsF32(a.global, l.shape()) || !IsF32(a.out, l.shape()) ||
      !IsF32(a.gate, {l.dim(0), 2 * l.dim(1)}) || (a.gate_bias != nullptr && !IsF32(a.gate_bias, {2 * l.dim(1)}))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GatedFusion: gate ", a.gate->DebugString(), ", gate_bias ",
        a.gate_bias != nullptr ? a.gate_bias->DebugString() : "none", ", local ", l.DebugString(), ", global ",
        a.global->DebugString(), ", out ", a.out->DebugString(),
        " (want F32 gate [T, 2D], gate_bias [2D], local, global and out [T, D])"));
  }
  return CheckWritable("GatedFusion", "out", *a.out);
}

}  // namespace

absl::Status GatedFusion(const Context& ctx, const GatedFusionArgs& args) {
  MCSERVE_RETURN_IF_ERROR(Validate(ctx, args));
  return DispatchOp(ctx, "GatedFusion", &internal::GatedFusionCpu, MCSERVE_CUDA_FN(internal::cuda::GatedFusionCuda),
                    &internal::cuda_emu::GatedFusionCuda, args);
}

}  // namespace mcserve::kernels
