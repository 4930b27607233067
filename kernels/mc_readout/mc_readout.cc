#include "kernels/mc_readout/mc_readout.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/core/csr.h"
#include "base/status_macros.h"
#include "kernels/core/tensor_data.h"
#include "kernels/core/dispatch.h"
#include "kernels/core/validate.h"

namespace mcserve::kernels {
namespace {

absl::Status Bad(const std::string& msg) { return absl::InvalidArgumentError(absl::StrCat("McReadout: ", msg)); }

// CheckOnDevice, then CheckTensor.
absl::Status Check(const char* name, const Tensor& t, DType dtype, const Shape& shape, Device dev,
                   const char* want) {
  return CheckArg("McReadout", name, t, dev, {dtype, shape, want});
}

const char* CombineName(McCombine c) {
  switch (c) {
    case McCombine::kSum: return "sum";
    case McCombine::kSoftmax: return "softmax";
    case McCombine::kTopKSoftmax: return "top-k softmax";
  }
  return nullptr;
}

constexpr int64_t kPagesAhead = 4;  // pages prefetched ahead of their checks

// Asks for every cache line of the Tensor object at t (its fields straddle two lines wherever it sits).
inline void PrefetchTensor(const Tensor* t) {
  __builtin_prefetch(t);
  __builtin_prefetch(reinterpret_cast<const char*>(t) + sizeof(Tensor) - 1);
}

// The bytes of out, against which every page is checked: Overlaps' test with out's extent taken once
// (a read-out checks every page it lists, every token).
struct OutBytes {
  const char* begin;
  int64_t size;
  // Whether `bytes` bytes at `p` overlap out (empty ranges never do, as in Overlaps).
  bool Overlap(const void* p, int64_t bytes) const {
    const char* c = static_cast<const char*>(p);
    return size > 0 && bytes > 0 && begin < c + bytes && c < begin + size;
  }
};

// What every page must be: its memory [Hs, K, V] and pooled key [Hs, K] (F32), with their sizes.
struct PageSpecs {
  TensorSpec memory, key;
  int64_t memory_bytes, key_bytes;
};

// pages[i]: present, `specs.memory` on the device (with its pooled key `specs.key` for the softmax
// combines), and not overlapping out.
absl::Status CheckPage(const McReadoutArgs& a, int64_t i, const OutBytes& out, const PageSpecs& specs, Device dev) {
  const McPage& page = a.pages[i];
  const bool softmax = a.combine != McCombine::kSum;
  if (page.memory == nullptr) return Bad(absl::StrCat(ListItem{"pages", i, ".memory"}.Name(), " is required"));
  MCSERVE_RETURN_IF_ERROR(CheckListTensor("McReadout", {"pages", i, ".memory"}, *page.memory, dev, specs.memory));
  if (softmax) {
    if (page.pooled_key == nullptr) {
      return Bad(absl::StrCat(ListItem{"pages", i, ".pooled_key"}.Name(), " is required by combine ",
                              CombineName(a.combine)));
    }
    MCSERVE_RETURN_IF_ERROR(
        CheckListTensor("McReadout", {"pages", i, ".pooled_key"}, *page.pooled_key, dev, specs.key));
  }
  if (out.Overlap(RawData(*page.memory), specs.memory_bytes) ||
      (softmax && out.Overlap(RawData(*page.pooled_key), specs.key_bytes))) {
    return Bad(absl::StrCat("out overlaps pages[", i, "]"));
  }
  return absl::OkStatus();
}

absl::Status Validate(const Context& ctx, const McReadoutArgs& a) {
  const char* combine = CombineName(a.combine);
  if (combine == nullptr) return Bad("unknown combine kind");
  const bool softmax = a.combine != McCombine::kSum;
  if (a.q == nullptr || a.online == nullptr || a.out == nullptr || a.token_page_offsets == nullptr ||
      a.token_pages == nullptr) {
    return Bad("q, online, out, token_page_offsets and token_pages are required");
  }
  if (softmax && (a.u == nullptr || a.online_pool == nullptr)) {
    return Bad(absl::StrCat("u and online_pool are required by combine ", combine));
  }
  if (a.combine == McCombine::kTopKSoftmax && a.top_k < 1) {
    return Bad(absl::StrCat("top_k = ", a.top_k, " (want >= 1 for combine ", combine, ")"));
  }
  if (!std::isfinite(a.online_weight) || !std::isfinite(a.cached_weight)) {
    return Bad(absl::StrCat("online_weight ", a.online_weight, " and cached_weight ", a.cached_weight,
                            " must be finite"));
  }
  MCSERVE_RETURN_IF_ERROR(CheckOnDevice("McReadout", ctx.device,
                                        {{"q", a.q}, {"u", a.u}, {"online_pool", a.online_pool}, {"online", a.online},
                                         {"token_page_offsets", a.token_page_offsets},
                                         {"token_pages", a.token_pages}, {"out", a.out}}));
  const Tensor &q = *a.q, &online = *a.online, &out = *a.out;
  if (q.rank() != 3 || online.rank() != 3 || q.dtype() != DType::kF32 || online.dtype() != DType::kF32 ||
      online.dim(0) != q.dim(0) || online.dim(1) != q.dim(1)) {
    return Bad(absl::StrCat("q ", q.DebugString(), ", online ", online.DebugString(),
                            " (want F32 [T, Hs, K] and [T, Hs, V])"));
  }
  const int64_t t = q.dim(0), hs = q.dim(1), k = q.dim(2), v = online.dim(2);
  const Device dev = ctx.device;
  MCSERVE_RETURN_IF_ERROR(Check("online", online, DType::kF32, {t, hs, v}, dev, "[T, Hs, V]"));
  MCSERVE_RETURN_IF_ERROR(Check("out", out, DType::kF32, {t, hs, v}, dev, "[T, Hs, V]"));
  if (out.read_only()) return Bad("out is read-only");
  if (softmax) {
    MCSERVE_RETURN_IF_ERROR(Check("u", *a.u, DType::kF32, {t, hs, k}, dev, "[T, Hs, K]"));
    MCSERVE_RETURN_IF_ERROR(Check("online_pool", *a.online_pool, DType::kF32, {t, hs, k}, dev, "[T, Hs, K]"));
  }
  const int64_t num_pages = static_cast<int64_t>(a.pages.size());
  const Shape memory_shape = {hs, k, v}, key_shape = {hs, k};
  const OutBytes out_bytes{static_cast<const char*>(RawData(out)), out.nbytes()};
  const PageSpecs specs{.memory = {DType::kF32, memory_shape, "[Hs, K, V]"},
                        .key = {DType::kF32, key_shape, "[Hs, K]"},
                        .memory_bytes = NumElements(memory_shape) * DTypeSize(DType::kF32),
                        .key_bytes = NumElements(key_shape) * DTypeSize(DType::kF32)};
  for (int64_t i = 0; i < num_pages; ++i) {
    // Each page's tensors are touched once, here, with the next pages' fetched ahead (the engine's
    // lists keep them side by side; staged pages and running sums come from elsewhere).
    if (i + kPagesAhead < num_pages) {
      PrefetchTensor(a.pages[i + kPagesAhead].memory);
      PrefetchTensor(a.pages[i + kPagesAhead].pooled_key);
    }
    MCSERVE_RETURN_IF_ERROR(CheckPage(a, i, out_bytes, specs, dev));
  }
  const Tensor &offsets = *a.token_page_offsets, &token_pages = *a.token_pages;
  MCSERVE_RETURN_IF_ERROR(Check("token_page_offsets", offsets, DType::kI32, {t + 1}, dev, "[T + 1]"));
  if (token_pages.rank() != 1) {
    return Bad(absl::StrCat("token_pages ", token_pages.DebugString(), " (want I32 [P])"));
  }
  MCSERVE_RETURN_IF_ERROR(Check("token_pages", token_pages, DType::kI32, token_pages.shape(), dev, "[P]"));
  MCSERVE_RETURN_IF_ERROR(ValidateCsr("McReadout", offsets, token_pages, t, num_pages));

  // out may be online itself, but must not overlap any other input.
  if (Overlaps(out, online) && RawData(out) != RawData(online)) return Bad("out partially overlaps online");
  for (const NamedTensor& input : {NamedTensor{"q", &q}, NamedTensor{"u", softmax ? a.u : nullptr},
                                   NamedTensor{"online_pool", softmax ? a.online_pool : nullptr}}) {
    if (input.tensor != nullptr && Overlaps(out, *input.tensor)) return Bad(absl::StrCat("out overlaps ", input.name));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status McReadout(const Context& ctx, const McReadoutArgs& args) {
  MCSERVE_RETURN_IF_ERROR(Validate(ctx, args));
  return DispatchOp(ctx, "McReadout", &internal::McReadoutCpu, MCSERVE_CUDA_FN(internal::cuda::McReadoutCuda),
                    &internal::cuda_emu::McReadoutCuda, args);
}

}  // namespace mcserve::kernels
