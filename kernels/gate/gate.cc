#include "kernels/gate/gate.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "kernels/core/dispatch.h"
#include "base/status_macros.h"
#include "kernels/core/validate.h"

namespace mcserve::kernels {
namespace {

// a_log / dt_bias: a float [H] vector (its device is checked by Validate).
absl::Status CheckHeadVector(const char* name, const Tensor* t, int64_t heads) {
  if (t == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("Gate: ", name, " is required for kSoftplusDecay"));
  }
  if (!IsFloatDType(t->dtype()) || t->rank() != 1 || t->dim(0) != heads) {
    return absl::InvalidArgumentError(
        absl::StrCat("Gate: ", name, " ", t->DebugString(), " (want F32|BF16|F16 [", heads, "])"));
  }
  return absl::OkStatus();
}

absl::Status Validate(const Context& ctx, const GateArgs& a) {
  if (a.x == nullptr || a.out == nullptr) return absl::InvalidArgumentError("Gate: x and out are required");
  MCSERVE_RETURN_IF_ERROR(CheckOnDevice("Gate", ctx.device,
                                        {{"x", a.x}, {"a_log", a.a_log}, {"dt_bias", a.dt_bias}, {"out", a.out}}));
  const Tensor &x = *a.x, &out = *a.out;
  if (x.dtype() != DType::kF32 || x.rank() != 2 || out.dtype() != DType::kF32 || out.shape() != x.shape()) {
    return absl::InvalidArgumentError(absl::StrCat("Gate: x ", x.DebugString(), ", out ", out.DebugString(),
                                                   " (want F32 [T, H] or [T, D] for both)"));
  }
  MCSERVE_RETURN_IF_ERROR(CheckWritable("Gate", "out", out));
  switch (a.kind) {
    case GateKind::kSoftplusDecay:
      MCSERVE_RETURN_IF_ERROR(CheckHeadVector("a_log", a.a_log, x.dim(1)));
      return CheckHeadVector("dt_bias", a.dt_bias, x.dim(1));
    case GateKind::kLogSigmoidDecay:
      if (!std::isfinite(a.normalizer) || a.normalizer <= 0.0f) {
        return absl::InvalidArgumentError(
            absl::StrCat("Gate: normalizer ", a.normalizer, " must be finite and > 0"));
      }
      if (a.has_clamp_min && std::isnan(a.clamp_min)) {
        return absl::InvalidArgumentError("Gate: clamp_min is NaN");
      }
      return absl::OkStatus();
  }
  return absl::InvalidArgumentError("Gate: unknown kind");
}

}  // namespace

absl::Status Gate(const Context& ctx, const GateArgs& args) {
  MCSERVE_RETURN_IF_ERROR(Validate(ctx, args));
  return DispatchOp(ctx, "Gate", &internal::GateCpu, MCSERVE_CUDA_FN(internal::cuda::GateCuda),
                    &internal::cuda_emu::GateCuda, args);
}

}  // namespace mcserve::kernels
