#include "kernels/feature_map/feature_map.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/feature_map/feature_map_math.h"
#include "kernels/core/dispatch.h"
#include "kernels/core/validate.h"

namespace mcserve::kernels {
namespace {

bool ValidKind(FeatureMapKind k) {
  switch (k) {
    case FeatureMapKind::kIdentity:
    case FeatureMapKind::kElu:
    case FeatureMapKind::kRelu:
    case FeatureMapKind::kHadamard:
    case FeatureMapKind::kHedgehog:
    case FeatureMapKind::kT2R:
    case FeatureMapKind::kDpfp:
    case FeatureMapKind::kDpfp3:
      return true;
  }
  return false;
}

// Checks an optional parameter: must be absent when !used, present when required, else `shape`.
absl::Status CheckParam(const char* name, const Tensor* t, bool used, bool required, const Shape& shape) {
  if (t == nullptr) {
    if (required) return absl::InvalidArgumentError(absl::StrCat("FeatureMap: ", name, " is required for this kind"));
    return absl::OkStatus();
  }
  if (!used) return absl::InvalidArgumentError(absl::StrCat("FeatureMap: ", name, " is not used by this kind"));
  if (!IsFloatDType(t->dtype()) || t->shape() != shape) {
    return absl::InvalidArgumentError(absl::StrCat("FeatureMap: ", name, " ", t->DebugString(), " (want F32|BF16|F16 ",
                                                   ShapeString(shape), ")"));
  }
  return absl::OkStatus();
}

absl::Status Validate(const Context& ctx, const FeatureMapArgs& a) {
  if (!ValidKind(a.kind)) return absl::InvalidArgumentError("FeatureMap: unknown kind");
  if (a.x == nullptr || a.out == nullptr) return absl::InvalidArgumentError("FeatureMap: x and out are required");
  MCSERVE_RETURN_IF_ERROR(CheckOnDevice(
      "FeatureMap", ctx.device,
      {{"x", a.x}, {"w1", a.w1}, {"b1", a.b1}, {"w2", a.w2}, {"b2", a.b2}, {"out", a.out}}));
  const Tensor &x = *a.x, &out = *a.out;
  if (x.dtype() != DType::kF32 || x.rank() != 3) {
    return absl::InvalidArgumentError(absl::StrCat("FeatureMap: x ", x.DebugString(), " (want F32 [T, heads, d])"));
  }
  const int64_t d = x.dim(2);
  const Shape want_out = {x.dim(0), x.dim(1), FeatureMapOutDim(a.kind, d)};
  if (out.dtype() != DType::kF32 || out.shape() != want_out || out.read_only()) {
    return absl::InvalidArgumentError(absl::StrCat("FeatureMap: out ", out.DebugString(), " for x ", x.DebugString(),
                                                   " (want writable F32 ", ShapeString(want_out), ")"));
  }
  const bool layer1 = a.kind == FeatureMapKind::kHadamard || a.kind == FeatureMapKind::kHedgehog ||
                      a.kind == FeatureMapKind::kT2R;
  const bool layer2 = a.kind == FeatureMapKind::kHadamard;
  MCSERVE_RETURN_IF_ERROR(CheckParam("w1", a.w1, layer1, layer1, {d, d}));
  MCSERVE_RETURN_IF_ERROR(CheckParam("b1", a.b1, layer1, false, {d}));
  MCSERVE_RETURN_IF_ERROR(CheckParam("w2", a.w2, layer2, layer2, {d, d}));
  MCSERVE_RETURN_IF_ERROR(CheckParam("b2", a.b2, layer2, false, {d}));
  return absl::OkStatus();
}

}  // namespace

int64_t FeatureMapOutDim(FeatureMapKind kind, int64_t d) {
  switch (kind) {
    case FeatureMapKind::kHedgehog:
      return 2 * d;
    case FeatureMapKind::kDpfp:
      return 2 * kDpfpNu * d;
    case FeatureMapKind::kDpfp3:
      return 2 * kDpfp3Nu * d;
    default:
      return d;
  }
}

absl::Status FeatureMap(const Context& ctx, const FeatureMapArgs& args) {
  MCSERVE_RETURN_IF_ERROR(Validate(ctx, args));
  return DispatchOp(ctx, "FeatureMap", &internal::FeatureMapCpu, MCSERVE_CUDA_FN(internal::cuda::FeatureMapCuda),
                    &internal::cuda_emu::FeatureMapCuda, args);
}

}  // namespace mcserve::kernels
