// HopeFeatures (hope_features.h): validation and dispatch.
#include "kernels/hope_memory/hope_features.h"

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/core/dispatch.h"
#include "kernels/core/validate.h"
#include "kernels/hope_memory/hope_validate.h"

namespace mcserve::kernels {
namespace {

constexpr char kOp[] = "HopeFeatures";

absl::Status CheckPresentAndPlaced(const Context& ctx, const HopeFeaturesArgs& a) {
  if (a.x == nullptr || a.q_conv == nullptr || a.k_conv == nullptr || a.v_conv == nullptr || a.phase == nullptr ||
      a.fast == nullptr || a.fast_anchor == nullptr || a.q == nullptr || a.k == nullptr || a.v == nullptr ||
      a.alpha == nullptr || a.eta == nullptr) {
    return hope_validate::Bad(kOp, "x, q_conv, k_conv, v_conv, phase, fast, fast_anchor, q, k, v, alpha and eta are "
                                   "required");
  }
  return CheckOnDevice(kOp, ctx.device,
                       {{"x", a.x}, {"q_pre", a.q_pre}, {"beta", a.beta}, {"skip", a.skip}, {"q_conv", a.q_conv},
                        {"k_conv", a.k_conv}, {"v_conv", a.v_conv}, {"phase", a.phase}, {"fast", a.fast}, {"fast_anchor", a.fast_anchor},
                        {"fast_momentum", a.fast_momentum}, {"conv_q", a.conv_q}, {"conv_k", a.conv_k},
                        {"conv_v", a.conv_v}, {"q", a.q}, {"k", a.k}, {"v", a.v}, {"alpha", a.alpha}, {"eta", a.eta}});
}

absl::Status CheckShapes(const HopeFeaturesArgs& a, int64_t t, int64_t h, int64_t slots) {
  const HopeMemoryOptions& o = a.options;
  const int64_t d = o.head_dim, k = o.conv_size, pf = HopeFastParams(o);
  MCSERVE_RETURN_IF_ERROR(hope_validate::Optional(kOp, "q_pre", a.q_pre, !o.adaptive_q, {t, h, d}, "[T, H, d]",
                                                  o.adaptive_q ? "with adaptive_q" : "without adaptive_q"));
  const bool data = o.momentum == HopeMomentum::kData;
  MCSERVE_RETURN_IF_ERROR(hope_validate::Optional(kOp, "beta", a.beta, data, {t, h}, "[T, H]",
                                                  data ? "with momentum data" : "unless momentum data"));
  if (a.skip != nullptr) MCSERVE_RETURN_IF_ERROR(CheckTensor(kOp, "skip", *a.skip, DType::kF32, {2, h, d}, "[2, H, d]"));
  for (const auto& [name, w] : {std::pair{"q_conv", a.q_conv}, {"k_conv", a.k_conv}, {"v_conv", a.v_conv}}) {
    MCSERVE_RETURN_IF_ERROR(CheckTensor(kOp, name, *w, DType::kF32, {h * d, 1, k}, "[H·d, 1, K]"));
  }
  for (const auto& [name, f] : {std::pair{"q", a.q}, {"k", a.k}, {"v", a.v}}) {
    MCSERVE_RETURN_IF_ERROR(CheckTensor(kOp, name, *f, DType::kF32, {t, h, d}, "[T, H, d]"));
  }
  MCSERVE_RETURN_IF_ERROR(CheckTensor(kOp, "alpha", *a.alpha, DType::kF32, {t, h}, "[T, H]"));
  MCSERVE_RETURN_IF_ERROR(CheckTensor(kOp, "eta", *a.eta, DType::kF32, {t, h}, "[T, H]"));
  MCSERVE_RETURN_IF_ERROR(CheckTensor(kOp, "fast", *a.fast, DType::kF32, {slots, h, pf}, "[num_slots, H, Pf]"));
  MCSERVE_RETURN_IF_ERROR(
      CheckTensor(kOp, "fast_anchor", *a.fast_anchor, DType::kF32, {slots, h, pf}, "[num_slots, H, Pf]"));
  const bool mom = o.momentum != HopeMomentum::kNone;
  MCSERVE_RETURN_IF_ERROR(hope_validate::Optional(kOp, "fast_momentum", a.fast_momentum, mom, {slots, h, pf},
                                                  "[num_slots, H, Pf]", mom ? "with momentum" : "without momentum"));
  char by_k[48];  // on the stack: a valid call allocates nothing
  std::snprintf(by_k, sizeof(by_k), "with conv_size %lld", static_cast<long long>(k));
  for (const auto& [name, w] : {std::pair{"conv_q", a.conv_q}, {"conv_k", a.conv_k}, {"conv_v", a.conv_v}}) {
    MCSERVE_RETURN_IF_ERROR(
        hope_validate::Optional(kOp, name, w, k > 1, {slots, k - 1, h * d}, "[num_slots, K − 1, H·d]", by_k));
  }
  return absl::OkStatus();
}

absl::Status Validate(const Context& ctx, const HopeFeaturesArgs& a) {
  MCSERVE_RETURN_IF_ERROR(hope_validate::Options(kOp, a.options));
  MCSERVE_RETURN_IF_ERROR(CheckPresentAndPlaced(ctx, a));
  if (a.x->rank() != 3 || a.x->dim(2) != a.options.head_dim || a.x->dim(1) < 1) {
    return hope_validate::Bad(kOp, absl::StrCat("x ", a.x->DebugString(), " (want F32 [T, H >= 1, d = ",
                                                a.options.head_dim, "])"));
  }
  MCSERVE_RETURN_IF_ERROR(CheckTensor(kOp, "x", *a.x, DType::kF32, a.x->shape(), "[T, H, d]"));
  if (a.fast->rank() != 3) {
    return hope_validate::Bad(kOp, absl::StrCat("fast ", a.fast->DebugString(), " (want [num_slots, H, Pf])"));
  }
  const int64_t t = a.x->dim(0), h = a.x->dim(1), slots = a.fast->dim(0);
  MCSERVE_RETURN_IF_ERROR(CheckShapes(a, t, h, slots));
  MCSERVE_RETURN_IF_ERROR(hope_validate::Disjoint(
      kOp,
      {{"q", a.q}, {"k", a.k}, {"v", a.v}, {"alpha", a.alpha}, {"eta", a.eta}, {"fast", a.fast},
       {"fast_anchor", a.fast_anchor}, {"fast_momentum", a.fast_momentum}, {"conv_q", a.conv_q},
       {"conv_k", a.conv_k}, {"conv_v", a.conv_v}},
      {{"x", a.x}, {"q_pre", a.q_pre}, {"beta", a.beta}, {"skip", a.skip}, {"q_conv", a.q_conv},
       {"k_conv", a.k_conv}, {"v_conv", a.v_conv}, {"phase", a.phase}, {"cu_seqlens", a.layout.cu_seqlens},
       {"slot_ids", a.layout.slot_ids}}));
  MCSERVE_RETURN_IF_ERROR(ValidateBatchLayout(kOp, a.layout, t, slots, ctx.device));
  return hope_validate::Phase(kOp, *a.phase, a.layout.slot_ids->dim(0));
}

}  // namespace

absl::Status HopeFeatures(const Context& ctx, const HopeFeaturesArgs& args) {
  MCSERVE_RETURN_IF_ERROR(Validate(ctx, args));
  return DispatchOp(ctx, kOp, &internal::HopeFeaturesCpu, MCSERVE_CUDA_FN(internal::cuda::HopeFeaturesCuda),
                    &internal::cuda_emu::HopeFeaturesCuda, args);
}

}  // namespace mcserve::kernels
