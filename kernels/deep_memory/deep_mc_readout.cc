#include "kernels/deep_memory/deep_mc_readout.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/core/csr.h"
#include "kernels/core/dispatch.h"
#include "base/status_macros.h"
#include "kernels/core/tensor_data.h"
#include "kernels/core/validate.h"

namespace mcserve::kernels {
namespace {

constexpr char kOp[] = "DeepMcReadout";

absl::Status Bad(const std::string& msg) { return absl::InvalidArgumentError(absl::StrCat(kOp, ": ", msg)); }

// CheckOnDevice, then CheckTensor.
absl::Status Check(const char* name, const Tensor& t, DType dtype, const Shape& shape, Device dev,
                   const char* want) {
  return CheckArg(kOp, name, t, dev, {dtype, shape, want});
}

const char* CombineName(DeepMcCombine c) {
  switch (c) {
    case DeepMcCombine::kSum: return "sum";
    case DeepMcCombine::kSoftmax: return "softmax";
    case DeepMcCombine::kTopKSoftmax: return "top-k softmax";
    case DeepMcCombine::kSoup: return "soup";
  }
  return nullptr;
}

absl::Status Validate(const Context& ctx, const DeepMcReadoutArgs& a) {
  const char* combine = CombineName(a.combine);
  if (combine == nullptr) return Bad("unknown combine kind");
  const bool gated = a.combine != DeepMcCombine::kSum;
  const bool soup = a.combine == DeepMcCombine::kSoup;
  if (a.q == nullptr || a.out == nullptr || a.token_page_offsets == nullptr || a.token_pages == nullptr) {
    return Bad("q, out, token_page_offsets and token_pages are required");
  }
  if (gated && (a.u == nullptr || a.online_pool == nullptr)) {
    return Bad(absl::StrCat("u and online_pool are required by combine ", combine));
  }
  if (soup) {
    if (a.online_memory == nullptr) return Bad("online_memory is required by combine soup");
    if (a.layout.cu_seqlens == nullptr || a.layout.slot_ids == nullptr) {
      return Bad("layout (cu_seqlens, slot_ids) is required by combine soup");
    }
  } else if (a.online == nullptr) {
    return Bad(absl::StrCat("online is required by combine ", combine));
  }
  if (a.activation != DeepMcActivation::kGelu && a.activation != DeepMcActivation::kSilu) {
    return Bad("unknown activation");
  }
  if (a.expansion < 1) return Bad(absl::StrCat("expansion = ", a.expansion, " (want >= 1)"));
  if (a.combine == DeepMcCombine::kTopKSoftmax && a.top_k < 1) {
    return Bad(absl::StrCat("top_k = ", a.top_k, " (want >= 1 for combine ", combine, ")"));
  }
  if (!std::isfinite(a.online_weight) || !std::isfinite(a.cached_weight)) {
    return Bad(absl::StrCat("online_weight ", a.online_weight, " and cached_weight ", a.cached_weight,
                            " must be finite"));
  }
  const Device dev = ctx.device;
  // Inputs the kind does not read are ignored (McReadout's convention): u, online_pool for kSum,
  // online_memory and layout for all but kSoup.
  const Tensor* u = gated ? a.u : nullptr;
  const Tensor* online_pool = gated ? a.online_pool : nullptr;
  const Tensor* online = a.online;
  const Tensor* online_memory = soup ? a.online_memory : nullptr;
  const Tensor* cu_seqlens = soup ? a.layout.cu_seqlens : nullptr;
  const Tensor* slot_ids = soup ? a.layout.slot_ids : nullptr;
  MCSERVE_RETURN_IF_ERROR(CheckOnDevice(kOp, dev,
                                        {{"q", a.q}, {"u", u}, {"online_pool", online_pool}, {"online", online},
                                         {"online_memory", online_memory}, {"ln_weight", a.ln_weight},
                                         {"ln_bias", a.ln_bias}, {"token_page_offsets", a.token_page_offsets},
                                         {"token_pages", a.token_pages}, {"out", a.out}}));
  const Tensor& q = *a.q;
  if (q.rank() != 3 || q.dtype() != DType::kF32) return Bad(absl::StrCat("q ", q.DebugString(), " (want F32 [T, H, d])"));
  const int64_t t = q.dim(0), h = q.dim(1), d = q.dim(2);
  const int64_t p = 2 * static_cast<int64_t>(a.expansion) * d * d;
  MCSERVE_RETURN_IF_ERROR(Check("out", *a.out, DType::kF32, {t, h, d}, dev, "[T, H, d]"));
  MCSERVE_RETURN_IF_ERROR(CheckWritable(kOp, "out", *a.out));
  if (online != nullptr) MCSERVE_RETURN_IF_ERROR(Check("online", *a.online, DType::kF32, {t, h, d}, dev, "[T, H, d]"));
  if (gated) {
    MCSERVE_RETURN_IF_ERROR(Check("u", *a.u, DType::kF32, {t, h, d}, dev, "[T, H, d]"));
    MCSERVE_RETURN_IF_ERROR(Check("online_pool", *a.online_pool, DType::kF32, {t, h, d}, dev, "[T, H, d]"));
  }
  if ((a.ln_weight == nullptr) != (a.ln_bias == nullptr)) {
    return Bad("ln_weight and ln_bias go together (both or neither)");
  }
  if (a.ln_weight != nullptr) {
    MCSERVE_RETURN_IF_ERROR(Check("ln_weight", *a.ln_weight, DType::kF32, {h, d}, dev, "[H, d]"));
    MCSERVE_RETURN_IF_ERROR(Check("ln_bias", *a.ln_bias, DType::kF32, {h, d}, dev, "[H, d]"));
    if (!(a.ln_eps > 0.0f) || !std::isfinite(a.ln_eps)) {
      return Bad(absl::StrCat("ln_eps = ", a.ln_eps, " (want finite > 0)"));
    }
  }
  if (soup) {
    const Tensor& om = *a.online_memory;
    if (om.rank() != 3) {
      return Bad(absl::StrCat("online_memory ", om.DebugString(), " (want F32 [num_slots, H, P = 2·expansion·d²])"));
    }
    MCSERVE_RETURN_IF_ERROR(Check("online_memory", om, DType::kF32, {om.dim(0), h, p}, dev,
                                  "[num_slots, H, P = 2·expansion·d²]"));
    // Soup reads each slot once per token: a slot may serve only one sequence, like any state.
    MCSERVE_RETURN_IF_ERROR(ValidateBatchLayout(kOp, a.layout, t, om.dim(0), dev));
  }
  const int64_t num_pages = static_cast<int64_t>(a.pages.size());
  const Shape memory_shape = {h, p}, key_shape = {h, d};
  for (int64_t i = 0; i < num_pages; ++i) {
    const DeepMcPage& page = a.pages[i];
    if (page.memory == nullptr) return Bad(absl::StrCat(ListItem{"pages", i, ".memory"}.Name(), " is required"));
    MCSERVE_RETURN_IF_ERROR(CheckListTensor(kOp, {"pages", i, ".memory"}, *page.memory, dev,
                                            {DType::kF32, memory_shape, "[H, P = 2·expansion·d²]"}));
    if (gated) {
      if (page.pooled_key == nullptr) {
        return Bad(absl::StrCat(ListItem{"pages", i, ".pooled_key"}.Name(), " is required by combine ", combine));
      }
      MCSERVE_RETURN_IF_ERROR(CheckListTensor(kOp, {"pages", i, ".pooled_key"}, *page.pooled_key, dev,
                                              {DType::kF32, key_shape, "[H, d]"}));
    }
    if (!std::isfinite(page.weight_scale)) {
      return Bad(absl::StrCat(ListItem{"pages", i}.Name(), ".weight_scale = ", page.weight_scale, " (want finite)"));
    }
  }
  const Tensor &offsets = *a.token_page_offsets, &token_pages = *a.token_pages;
  MCSERVE_RETURN_IF_ERROR(Check("token_page_offsets", offsets, DType::kI32, {t + 1}, dev, "[T + 1]"));
  if (token_pages.rank() != 1) return Bad(absl::StrCat("token_pages ", token_pages.DebugString(), " (want I32 [E])"));
  MCSERVE_RETURN_IF_ERROR(Check("token_pages", token_pages, DType::kI32, token_pages.shape(), dev, "[E]"));
  MCSERVE_RETURN_IF_ERROR(ValidateCsr(kOp, offsets, token_pages, t, num_pages));

  // out may be online itself, but must not overlap any other input.
  const Tensor& out = *a.out;
  if (online != nullptr && Overlaps(out, *online) && RawData(out) != RawData(*online)) {
    return Bad("out partially overlaps online");
  }
  for (const NamedTensor& input :
       {NamedTensor{"q", a.q}, NamedTensor{"u", u}, NamedTensor{"online_pool", online_pool},
        NamedTensor{"online_memory", online_memory}, NamedTensor{"ln_weight", a.ln_weight},
        NamedTensor{"ln_bias", a.ln_bias}, NamedTensor{"token_page_offsets", a.token_page_offsets},
        NamedTensor{"token_pages", a.token_pages}, NamedTensor{"cu_seqlens", cu_seqlens},
        NamedTensor{"slot_ids", slot_ids}}) {
    if (input.tensor != nullptr && Overlaps(out, *input.tensor)) return Bad(absl::StrCat("out overlaps ", input.name));
  }
  for (int64_t i = 0; i < num_pages; ++i) {
    if (Overlaps(out, *a.pages[i].memory)) return Bad(absl::StrCat("out overlaps pages[", i, "].memory"));
    if (gated && Overlaps(out, *a.pages[i].pooled_key)) {
      return Bad(absl::StrCat("out overlaps pages[", i, "].pooled_key"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status DeepMcReadout(const Context& ctx, const DeepMcReadoutArgs& args) {
  MCSERVE_RETURN_IF_ERROR(Validate(ctx, args));
  return DispatchOp(ctx, kOp, &internal::DeepMcReadoutCpu, MCSERVE_CUDA_FN(internal::cuda::DeepMcReadoutCuda),
                    &internal::cuda_emu::DeepMcReadoutCuda, args);
}

}  // namespace mcserve::kernels
