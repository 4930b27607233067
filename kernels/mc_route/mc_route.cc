#include "kernels/mc_route/mc_route.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/core/csr.h"
#include "kernels/core/dispatch.h"
#include "base/status_macros.h"
#include "kernels/core/validate.h"
#include "kernels/core/tensor_data.h"

namespace mcserve::kernels {
namespace {

absl::Status Bad(const std::string& msg) { return absl::InvalidArgumentError(absl::StrCat("McRoute: ", msg)); }

// `t` is on the context's device `dev`, or an error naming the tensor and both devices.
// CheckOnDevice, then CheckTensor.
absl::Status Check(const char* name, const Tensor& t, DType dtype, const Shape& shape, Device dev,
                   const char* want) {
  return CheckArg("McRoute", name, t, dev, {dtype, shape, want});
}

absl::Status Validate(const Context& ctx, const McRouteArgs& a) {
  if (a.u == nullptr || a.token_page_offsets == nullptr || a.token_pages == nullptr || a.selected == nullptr) {
    return Bad("u, token_page_offsets, token_pages and selected are required");
  }
  const int64_t num_pages = static_cast<int64_t>(a.pooled_keys.size());
  for (int64_t i = 0; i < num_pages; ++i) {
    if (a.pooled_keys[i] == nullptr) return Bad(absl::StrCat("pooled_keys[", i, "] is required"));
  }
  if (a.top_k < 1) return Bad(absl::StrCat("top_k = ", a.top_k, " (want >= 1)"));
  const Device dev = ctx.device;
  const Tensor &u = *a.u, &offsets = *a.token_page_offsets, &token_pages = *a.token_pages, &selected = *a.selected;
  MCSERVE_RETURN_IF_ERROR(CheckOnDevice("McRoute", "u", u, dev));
  if (u.dtype() != DType::kF32 || u.rank() != 3) {
    return Bad(absl::StrCat("u ", u.DebugString(), " (want F32 [T, Hs, K])"));
  }
  const int64_t t = u.dim(0), hs = u.dim(1), k = u.dim(2);
  const Shape key_shape = {hs, k};
  for (int64_t i = 0; i < num_pages; ++i) {
    MCSERVE_RETURN_IF_ERROR(
        CheckListTensor("McRoute", {"pooled_keys", i}, *a.pooled_keys[i], dev, {DType::kF32, key_shape, "[Hs, K]"}));
  }
  MCSERVE_RETURN_IF_ERROR(Check("token_page_offsets", offsets, DType::kI32, {t + 1}, dev, "[T + 1]"));
  MCSERVE_RETURN_IF_ERROR(CheckOnDevice("McRoute", "token_pages", token_pages, dev));
  if (token_pages.dtype() != DType::kI32 || token_pages.rank() != 1) {
    return Bad(absl::StrCat("token_pages ", token_pages.DebugString(), " (want I32 [P])"));
  }
  MCSERVE_RETURN_IF_ERROR(Check("selected", selected, DType::kI32, {t, hs, a.top_k}, dev, "[T, Hs, top_k]"));
  if (selected.read_only()) return Bad("selected is read-only");
  for (const NamedTensor& input : {NamedTensor{"u", &u}, NamedTensor{"token_page_offsets", &offsets},
                                   NamedTensor{"token_pages", &token_pages}}) {
    if (Overlaps(selected, *input.tensor)) return Bad(absl::StrCat("selected overlaps ", input.name));
  }
  for (int64_t i = 0; i < num_pages; ++i) {
    if (Overlaps(selected, *a.pooled_keys[i])) return Bad(absl::StrCat("selected overlaps pooled_keys[", i, "]"));
  }
  return ValidateCsr("McRoute", offsets, token_pages, t, num_pages);
}

}  // namespace

absl::Status McRoute(const Context& ctx, const McRouteArgs& args) {
  MCSERVE_RETURN_IF_ERROR(Validate(ctx, args));
  return DispatchOp(ctx, "McRoute", &internal::McRouteCpu, MCSERVE_CUDA_FN(internal::cuda::McRouteCuda),
                    &internal::cuda_emu::McRouteCuda, args);
}

}  // namespace mcserve::kernels
