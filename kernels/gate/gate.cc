#include "kernels/gate/gate.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "kernels/core/dispatch.h"

namespace mcserve::kernels {
namespace {

bool IsFloat(DType t) { return t == DType::kF32 || t == DType::kBF16 || t == DType::kF16; }

// a_log / dt_bias: a float [H] vector on `device`.
absl::Status CheckHeadVector(const char* name, const Tensor* t, int64_t heads, Device device) {
  if (t == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("Gate: ", name, " is required for kSoftplusDecay"));
  }
  if (!IsFloat(t->dtype()) || t->rank() != 1 || t->dim(0) != heads) {
    return absl::InvalidArgumentError(
        absl::StrCat("Gate: ", name, " ", t->DebugString(), " (want F32|BF16|F16 [", heads, "])"));
  }
  if (t->device() != device) return absl::InvalidArgumentError("Gate: tensors on different devices");
  return absl::OkStatus();
}

absl::Status Validate(const GateArgs& a) {
  if (a.x == nullptr || a.out == nullptr) return absl::InvalidArgumentError("Gate: x and out are required");
  const Tensor &x = *a.x, &out = *a.out;
  if (x.dtype() != DType::kF32 || x.rank() != 2 || out.dtype() != DType::kF32 || out.shape() != x.shape()) {
    return absl::InvalidArgumentError(absl::StrCat("Gate: x ", x.DebugString(), ", out ", out.DebugString(),
                                                   " (want F32 [T, H] or [T, D] for both)"));
  }
  if (x.device() != out.device()) return absl::InvalidArgumentError("Gate: tensors on different devices");
  if (out.read_only()) return absl::InvalidArgumentError("Gate: out is read-only");
  switch (a.kind) {
    case GateKind::kSoftplusDecay:
      if (absl::Status s = CheckHeadVector("a_log", a.a_log, x.dim(1), x.device()); !s.ok()) return s;
      return CheckHeadVector("dt_bias", a.dt_bias, x.dim(1), x.device());
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
  if (absl::Status s = Validate(args); !s.ok()) return s;
  return DispatchOp(ctx, "Gate", &internal::GateCpu, MCSERVE_CUDA_FN(internal::cuda::GateCuda),
                    &internal::cuda_emu::GateCuda, args);
}

}  // namespace mcserve::kernels
