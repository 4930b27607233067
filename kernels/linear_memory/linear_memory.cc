#include "kernels/linear_memory/linear_memory.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/core/dispatch.h"
#include "kernels/core/validate.h"

namespace mcserve::kernels {
namespace {

absl::Status Bad(const std::string& msg) { return absl::InvalidArgumentError(absl::StrCat("LinearMemory: ", msg)); }

// An F32 tensor of exactly `shape`, or an error naming it (devices are checked by Validate).
absl::Status CheckF32(const char* name, const Tensor& t, const Shape& shape) {
  if (t.dtype() != DType::kF32 || t.shape() != shape) {
    return Bad(absl::StrCat(name, " ", t.DebugString(), " (want F32 ", ShapeString(shape), ")"));
  }
  return absl::OkStatus();
}

// An optional per-rule tensor: must be null when !used, present when required, else `shape`.
absl::Status CheckOptional(const char* name, const Tensor* t, bool used, bool required, const Shape& shape,
                           const char* rule) {
  if (t == nullptr) {
    return required ? Bad(absl::StrCat(name, " is required by rule ", rule)) : absl::OkStatus();
  }
  if (!used) return Bad(absl::StrCat(name, " is not used by rule ", rule, " (pass null)"));
  return CheckF32(name, *t, shape);
}

const char* RuleName(LinearMemoryRule r) {
  switch (r) {
    case LinearMemoryRule::kAdditive: return "additive";
    case LinearMemoryRule::kGatedDelta: return "gated_delta";
    case LinearMemoryRule::kSwla: return "swla";
    case LinearMemoryRule::kTitans: return "titans";
  }
  return nullptr;
}

}  // namespace

absl::Status ValidateLinearMemory(const Context& ctx, const LinearMemoryArgs& a) {
  const char* rule = RuleName(a.rule);
  if (rule == nullptr) return Bad("unknown rule");
  if (a.q == nullptr || a.k == nullptr || a.v == nullptr || a.state == nullptr || a.out == nullptr) {
    return Bad("q, k, v, state and out are required");
  }
  MCSERVE_RETURN_IF_ERROR(CheckOnDevice("LinearMemory", ctx.device,
                                        {{"q", a.q},
                                         {"k", a.k},
                                         {"v", a.v},
                                         {"key_decay", a.key_decay},
                                         {"decay", a.decay},
                                         {"beta", a.beta},
                                         {"gamma", a.gamma},
                                         {"state", a.state},
                                         {"aux", a.aux},
                                         {"out", a.out}}));
  const Tensor &q = *a.q, &k = *a.k, &v = *a.v, &state = *a.state, &out = *a.out;
  if (q.rank() != 3 || k.rank() != 3 || v.rank() != 3 || q.dtype() != DType::kF32 || k.dtype() != DType::kF32 ||
      v.dtype() != DType::kF32 || k.dim(0) != q.dim(0) || v.dim(0) != q.dim(0) || k.dim(2) != q.dim(2)) {
    return Bad(absl::StrCat("q ", q.DebugString(), ", k ", k.DebugString(), ", v ", v.DebugString(),
                            " (want F32 [T, Hq, K], [T, Hk, K], [T, Hv, V])"));
  }
  const int64_t t = q.dim(0), hq = q.dim(1), hk = k.dim(1), hv = v.dim(1), kd = q.dim(2), vd = v.dim(2);
  const int64_t hs = std::max({hq, hk, hv});
  if (hq < 1 || hk < 1 || hv < 1 || hs % hq != 0 || hs % hk != 0 || hs % hv != 0) {
    return Bad(absl::StrCat("head counts Hq=", hq, ", Hk=", hk, ", Hv=", hv, " must each divide max(Hq, Hk, Hv)"));
  }
  if (state.rank() != 4) return Bad(absl::StrCat("state ", state.DebugString(), " (want F32 [num_slots, Hs, K, V])"));
  const int64_t slots = state.dim(0);
  MCSERVE_RETURN_IF_ERROR(CheckF32("state", state, {slots, hs, kd, vd}));
  MCSERVE_RETURN_IF_ERROR(CheckF32("out", out, {t, hs, vd}));
  MCSERVE_RETURN_IF_ERROR(CheckWritable("LinearMemory", "state", state));
  MCSERVE_RETURN_IF_ERROR(CheckWritable("LinearMemory", "out", out));

  const LinearMemoryRule r = a.rule;
  const bool additive = r == LinearMemoryRule::kAdditive;
  const bool swla = r == LinearMemoryRule::kSwla;
  const bool titans = r == LinearMemoryRule::kTitans;
  if (a.normalize && !additive) return Bad(absl::StrCat("normalize applies to rule additive only, not ", rule));
  MCSERVE_RETURN_IF_ERROR(CheckOptional("key_decay", a.key_decay, additive, false, {t, hk, kd}, rule));
  MCSERVE_RETURN_IF_ERROR(CheckOptional("decay", a.decay, !additive, swla || titans, {t, hs}, rule));
  MCSERVE_RETURN_IF_ERROR(CheckOptional("beta", a.beta, !additive, !additive, {t, hs}, rule));
  MCSERVE_RETURN_IF_ERROR(CheckOptional("gamma", a.gamma, swla || titans, swla || titans, {t, hs}, rule));
  Shape aux_shape;
  if (additive && a.normalize) aux_shape = {slots, hs, kd};
  if (swla) aux_shape = {slots, hs, kd + vd};
  if (titans) aux_shape = {slots, hs, kd, vd};
  const bool aux_used = !aux_shape.empty();
  const Tensor* aux = a.aux;
  MCSERVE_RETURN_IF_ERROR(CheckOptional("aux", aux, aux_used, aux_used, aux_shape, rule));
  if (aux != nullptr) MCSERVE_RETURN_IF_ERROR(CheckWritable("LinearMemory", "aux", *aux));
  return ValidateBatchLayout("LinearMemory", a.layout, t, slots, ctx.device);
}

absl::Status LinearMemory(const Context& ctx, const LinearMemoryArgs& args) {
  MCSERVE_RETURN_IF_ERROR(ValidateLinearMemory(ctx, args));
  return DispatchOp(ctx, "LinearMemory", &internal::LinearMemoryCpu, MCSERVE_CUDA_FN(internal::cuda::LinearMemoryCuda),
                    &internal::cuda_emu::LinearMemoryCuda, args);
}

}  // namespace mcserve::kernels
