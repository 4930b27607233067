#include "kernels/lattice_memory/lattice_memory.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/core/dispatch.h"
#include "kernels/core/validate.h"

namespace mcserve::kernels {
namespace {

absl::Status Bad(const std::string& msg) { return absl::InvalidArgumentError(absl::StrCat("LatticeMemory: ", msg)); }

// An F32 tensor of exactly `shape`, or an error naming it (devices are checked by Validate).
absl::Status CheckF32(const char* name, const Tensor& t, const Shape& shape) {
  if (t.dtype() != DType::kF32 || t.shape() != shape) {
    return Bad(absl::StrCat(name, " ", t.DebugString(), " (want F32 ", ShapeString(shape), ")"));
  }
  return absl::OkStatus();
}

absl::Status Validate(const Context& ctx, const LatticeMemoryArgs& a) {
  if (a.variant != LatticeMemoryVariant::kDec && a.variant != LatticeMemoryVariant::kEnc &&
      a.variant != LatticeMemoryVariant::kSim) {
    return Bad("unknown variant");
  }
  if (a.q == nullptr || a.k == nullptr || a.v == nullptr || a.gamma == nullptr || a.state == nullptr ||
      a.out == nullptr) {
    return Bad("q, k, v, gamma, state and out are required");
  }
  MCSERVE_RETURN_IF_ERROR(CheckOnDevice("LatticeMemory", ctx.device,
                                        {{"q", a.q},
                                         {"k", a.k},
                                         {"v", a.v},
                                         {"gamma", a.gamma},
                                         {"mu", a.mu},
                                         {"state", a.state},
                                         {"out", a.out}}));
  if (a.q->rank() != 3 || a.v->rank() != 3 || a.state->rank() != 4) {
    return Bad(absl::StrCat("q ", a.q->DebugString(), ", v ", a.v->DebugString(), ", state ", a.state->DebugString(),
                            " (want [T, H, m], [T, H, d], [num_slots, H, m, d])"));
  }
  const int64_t t = a.q->dim(0), h = a.q->dim(1), m = a.q->dim(2), d = a.v->dim(2), slots = a.state->dim(0);
  if (h < 1 || m < 1 || d < 1) return Bad(absl::StrCat("q ", a.q->DebugString(), " and v need H, m, d >= 1"));
  MCSERVE_RETURN_IF_ERROR(CheckF32("q", *a.q, {t, h, m}));
  MCSERVE_RETURN_IF_ERROR(CheckF32("k", *a.k, {t, h, m}));
  MCSERVE_RETURN_IF_ERROR(CheckF32("v", *a.v, {t, h, d}));
  MCSERVE_RETURN_IF_ERROR(CheckF32("gamma", *a.gamma, {t, h}));
  if (a.mu != nullptr) MCSERVE_RETURN_IF_ERROR(CheckF32("mu", *a.mu, {t, h}));
  MCSERVE_RETURN_IF_ERROR(CheckF32("state", *a.state, {slots, h, m, d}));
  MCSERVE_RETURN_IF_ERROR(CheckF32("out", *a.out, {t, h, d}));
  MCSERVE_RETURN_IF_ERROR(CheckWritable("LatticeMemory", "state", *a.state));
  MCSERVE_RETURN_IF_ERROR(CheckWritable("LatticeMemory", "out", *a.out));
  return ValidateBatchLayout("LatticeMemory", a.layout, t, slots, ctx.device);
}

}  // namespace

absl::Status LatticeMemory(const Context& ctx, const LatticeMemoryArgs& args) {
  MCSERVE_RETURN_IF_ERROR(Validate(ctx, args));
  return DispatchOp(ctx, "LatticeMemory", &internal::LatticeMemoryCpu,
                    MCSERVE_CUDA_FN(internal::cuda::LatticeMemoryCuda), &internal::cuda_emu::LatticeMemoryCuda, args);
}

}  // namespace mcserve::kernels
