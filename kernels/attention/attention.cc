#include "kernels/attention/attention.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/core/dispatch.h"
#include "kernels/core/validate.h"

namespace mcserve::kernels {
namespace {

absl::Status Bad(const std::string& msg) { return absl::InvalidArgumentError(absl::StrCat("Attention: ", msg)); }

// An F32 tensor of exactly `shape`, or an error naming it (devices are checked by CheckOnDevice).
absl::Status CheckF32(const char* name, const Tensor& t, const Shape& shape, const char* want) {
  return CheckTensor("Attention", name, t, DType::kF32, shape, want);
}

absl::Status CheckPresentAndOnDevice(const Context& ctx, const AttentionArgs& a) {
  if (a.q == nullptr || a.k == nullptr || a.v == nullptr || a.cached == nullptr || a.k_cache == nullptr ||
      a.v_cache == nullptr || a.out == nullptr) {
    return Bad("q, k, v, cached, k_cache, v_cache and out are required");
  }
  return CheckOnDevice("Attention", ctx.device,
                       {{"q", a.q},
                        {"k", a.k},
                        {"v", a.v},
                        {"cached", a.cached},
                        {"k_cache", a.k_cache},
                        {"v_cache", a.v_cache},
                        {"out", a.out}});
}

// Shapes and dtypes: q and out [T, Hq, dh], k and v [T, Hkv, dh], caches [num_slots, capacity, Hkv, dh].
absl::Status CheckShapes(const AttentionArgs& a) {
  if (a.q->rank() != 3 || a.k->rank() != 3 || a.k_cache->rank() != 4) {
    return Bad(absl::StrCat("q ", a.q->DebugString(), ", k ", a.k->DebugString(), ", k_cache ",
                            a.k_cache->DebugString(), " (want [T, Hq, dh], [T, Hkv, dh], [num_slots, capacity, Hkv, dh])"));
  }
  const int64_t t = a.q->dim(0), hq = a.q->dim(1), dh = a.q->dim(2), hkv = a.k->dim(1);
  if (dh < 1 || dh > kAttentionMaxHeadDim) {
    return Bad(absl::StrCat("head dimension dh = ", dh, " of q ", a.q->DebugString(), " outside [1, ",
                            kAttentionMaxHeadDim, "]"));
  }
  if (hq < 1 || hkv < 1 || hq % hkv != 0) {
    return Bad(absl::StrCat("q heads Hq = ", hq, " must be a positive multiple of the kv heads Hkv = ", hkv,
                            " (q ", a.q->DebugString(), ", k ", a.k->DebugString(), ")"));
  }
  const int64_t slots = a.k_cache->dim(0), capacity = a.k_cache->dim(1);
  MCSERVE_RETURN_IF_ERROR(CheckF32("q", *a.q, {t, hq, dh}, "[T, Hq, dh]"));
  MCSERVE_RETURN_IF_ERROR(CheckF32("k", *a.k, {t, hkv, dh}, "[T, Hkv, dh]"));
  MCSERVE_RETURN_IF_ERROR(CheckF32("v", *a.v, {t, hkv, dh}, "[T, Hkv, dh]"));
  MCSERVE_RETURN_IF_ERROR(CheckF32("k_cache", *a.k_cache, {slots, capacity, hkv, dh}, "[num_slots, capacity, Hkv, dh]"));
  MCSERVE_RETURN_IF_ERROR(CheckF32("v_cache", *a.v_cache, {slots, capacity, hkv, dh}, "[num_slots, capacity, Hkv, dh]"));
  return CheckF32("out", *a.out, {t, hq, dh}, "[T, Hq, dh]");
}

// Outputs writable, and out overlapping nothing else; the two caches distinct.
absl::Status CheckOutputs(const AttentionArgs& a) {
  MCSERVE_RETURN_IF_ERROR(CheckWritable("Attention", "k_cache", *a.k_cache));
  MCSERVE_RETURN_IF_ERROR(CheckWritable("Attention", "v_cache", *a.v_cache));
  MCSERVE_RETURN_IF_ERROR(CheckWritable("Attention", "out", *a.out));
  if (Overlaps(*a.k_cache, *a.v_cache)) return Bad("k_cache and v_cache overlap");
  const NamedTensor others[] = {{"q", a.q}, {"k", a.k}, {"v", a.v}, {"k_cache", a.k_cache}, {"v_cache", a.v_cache}};
  for (const NamedTensor& o : others) {
    if (Overlaps(*a.out, *o.tensor)) return Bad(absl::StrCat("out overlaps ", o.name));
  }
  for (const NamedTensor& o : {NamedTensor{"k", a.k}, NamedTensor{"v", a.v}}) {
    if (Overlaps(*o.tensor, *a.k_cache) || Overlaps(*o.tensor, *a.v_cache)) {
      return Bad(absl::StrCat(o.name, " overlaps a cache"));
    }
  }
  return absl::OkStatus();
}

// Host-side `cached` values (device ones are checked by the kernel): 0 ≤ cached[b] and
// cached[b] + n_b ≤ capacity. Needs a validated host layout.
absl::Status CheckCachedValues(const AttentionArgs& a) {
  if (a.cached->device() != Device::kCpu) return absl::OkStatus();
  MCSERVE_ASSIGN_OR_RETURN(std::vector<int32_t> cached, a.cached->ToHostI32());
  MCSERVE_ASSIGN_OR_RETURN(std::vector<int32_t> cu, a.layout.cu_seqlens->ToHostI32());
  MCSERVE_ASSIGN_OR_RETURN(std::vector<int32_t> slots, a.layout.slot_ids->ToHostI32());
  const int64_t capacity = a.k_cache->dim(1);
  for (size_t b = 0; b < cached.size(); ++b) {
    const int64_t n = cu[b + 1] - cu[b];
    if (cached[b] < 0) return Bad(absl::StrCat("cached[", b, "] = ", cached[b], " is negative"));
    if (cached[b] + n > capacity) {
      return Bad(absl::StrCat("sequence ", b, " (slot ", slots[b], ") appends ", n, " rows to ", cached[b],
                              " cached positions, past the cache capacity ", capacity));
    }
  }
  return absl::OkStatus();
}

absl::Status Validate(const Context& ctx, const AttentionArgs& a) {
  MCSERVE_RETURN_IF_ERROR(CheckPresentAndOnDevice(ctx, a));
  MCSERVE_RETURN_IF_ERROR(CheckShapes(a));
  if (a.scale.has_value() && !(std::isfinite(*a.scale) && *a.scale > 0.0f)) {
    return Bad(absl::StrCat("scale ", *a.scale, " must be finite and > 0"));
  }
  MCSERVE_RETURN_IF_ERROR(CheckOutputs(a));
  MCSERVE_RETURN_IF_ERROR(ValidateBatchLayout("Attention", a.layout, a.q->dim(0), a.k_cache->dim(0), ctx.device));
  MCSERVE_RETURN_IF_ERROR(
      CheckTensor("Attention", "cached", *a.cached, DType::kI32, {a.layout.slot_ids->dim(0)}, "[B]"));
  return CheckCachedValues(a);
}

}  // namespace

absl::Status Attention(const Context& ctx, const AttentionArgs& args) {
  MCSERVE_RETURN_IF_ERROR(Validate(ctx, args));
  return DispatchOp(ctx, "Attention", &internal::AttentionCpu, MCSERVE_CUDA_FN(internal::cuda::AttentionCuda),
                    &internal::cuda_emu::AttentionCuda, args);
}

}  // namespace mcserve::kernels
