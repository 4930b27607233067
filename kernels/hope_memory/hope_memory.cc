#include "kernels/hope_memory/hope_memory.h"

#include <cstdio>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/core/dispatch.h"
#include "kernels/core/validate.h"
#include "kernels/hope_memory/hope_validate.h"

namespace mcserve::kernels {
namespace {

constexpr char kOp[] = "HopeMemory";

absl::Status Bad(const std::string& msg) { return hope_validate::Bad(kOp, msg); }

// An optional F32 tensor: present iff `used` (why says by which option), then exactly `shape`.
absl::Status CheckPresence(const char* name, const Tensor* t, bool used, const Shape& shape, const char* want,
                           const char* why) {
  return hope_validate::Optional(kOp, name, t, used, shape, want, why);
}

// Required tensors present, every tensor on ctx.device.
absl::Status CheckPresentAndPlaced(const Context& ctx, const HopeMemoryArgs& a) {
  if (a.x == nullptr || a.q_conv == nullptr || a.k_conv == nullptr || a.v_conv == nullptr || a.phase == nullptr ||
      a.memory == nullptr || a.mem_anchor == nullptr || a.fast == nullptr || a.fast_anchor == nullptr ||
      a.out == nullptr) {
    return Bad("x, q_conv, k_conv, v_conv, phase, memory, mem_anchor, fast, fast_anchor and out are required");
  }
  return CheckOnDevice(kOp, ctx.device,
                       {{"x", a.x}, {"q_pre", a.q_pre}, {"beta", a.beta}, {"skip", a.skip}, {"q_conv", a.q_conv},
                        {"k_conv", a.k_conv}, {"v_conv", a.v_conv}, {"phase", a.phase}, {"memory", a.memory},
                        {"mem_anchor", a.mem_anchor}, {"fast", a.fast}, {"fast_anchor", a.fast_anchor},
                        {"momentum", a.momentum}, {"fast_momentum", a.fast_momentum}, {"conv_q", a.conv_q},
                        {"conv_k", a.conv_k}, {"conv_v", a.conv_v}, {"out", a.out}});
}

// Per-token inputs and weights: x, q_pre, beta, skip, the conv taps, out.
absl::Status CheckInputs(const HopeMemoryArgs& a, int64_t t, int64_t h) {
  const HopeMemoryOptions& o = a.options;
  const int64_t d = o.head_dim, k = o.conv_size;
  MCSERVE_RETURN_IF_ERROR(CheckTensor(kOp, "x", *a.x, DType::kF32, {t, h, d}, "[T, H, d]"));
  MCSERVE_RETURN_IF_ERROR(CheckPresence("q_pre", a.q_pre, !o.adaptive_q, {t, h, d}, "[T, H, d]",
                                        o.adaptive_q ? "with adaptive_q" : "without adaptive_q"));
  const bool data = o.momentum == HopeMomentum::kData;
  MCSERVE_RETURN_IF_ERROR(
      CheckPresence("beta", a.beta, data, {t, h}, "[T, H]", data ? "with momentum data" : "unless momentum data"));
  if (a.skip != nullptr) MCSERVE_RETURN_IF_ERROR(CheckTensor(kOp, "skip", *a.skip, DType::kF32, {2, h, d}, "[2, H, d]"));
  for (const auto& [name, w] : {std::pair{"q_conv", a.q_conv}, {"k_conv", a.k_conv}, {"v_conv", a.v_conv}}) {
    MCSERVE_RETURN_IF_ERROR(CheckTensor(kOp, name, *w, DType::kF32, {h * d, 1, k}, "[H·d, 1, K]"));
  }
  return CheckTensor(kOp, "out", *a.out, DType::kF32, {t, h, d}, "[T, H, d]");
}

// The state pool: weights, anchors, momentum, conv windows; all writable.
absl::Status CheckState(const HopeMemoryArgs& a, int64_t h, int64_t slots) {
  const HopeMemoryOptions& o = a.options;
  const int64_t pm = HopeMemParams(o), pf = HopeFastParams(o), hd = h * o.head_dim, k = o.conv_size;
  MCSERVE_RETURN_IF_ERROR(CheckTensor(kOp, "memory", *a.memory, DType::kF32, {slots, h, pm}, "[num_slots, H, Pm]"));
  MCSERVE_RETURN_IF_ERROR(
      CheckTensor(kOp, "mem_anchor", *a.mem_anchor, DType::kF32, {slots, h, pm}, "[num_slots, H, Pm]"));
  MCSERVE_RETURN_IF_ERROR(CheckTensor(kOp, "fast", *a.fast, DType::kF32, {slots, h, pf}, "[num_slots, H, Pf]"));
  MCSERVE_RETURN_IF_ERROR(
      CheckTensor(kOp, "fast_anchor", *a.fast_anchor, DType::kF32, {slots, h, pf}, "[num_slots, H, Pf]"));
  const bool mom = o.momentum != HopeMomentum::kNone;
  const char* by_mom = mom ? "with momentum" : "without momentum";
  MCSERVE_RETURN_IF_ERROR(CheckPresence("momentum", a.momentum, mom, {slots, h, pm}, "[num_slots, H, Pm]", by_mom));
  MCSERVE_RETURN_IF_ERROR(
      CheckPresence("fast_momentum", a.fast_momentum, mom, {slots, h, pf}, "[num_slots, H, Pf]", by_mom));
  const bool conv = k > 1;
  char by_k[48];  // on the stack: a valid call allocates nothing
  std::snprintf(by_k, sizeof(by_k), "with conv_size %lld", static_cast<long long>(k));
  for (const auto& [name, w] : {std::pair{"conv_q", a.conv_q}, {"conv_k", a.conv_k}, {"conv_v", a.conv_v}}) {
    MCSERVE_RETURN_IF_ERROR(CheckPresence(name, w, conv, {slots, k - 1, hd}, "[num_slots, K − 1, H·d]", by_k));
  }
  return absl::OkStatus();
}

// Outputs writable and sharing storage with no other argument.
absl::Status CheckWritten(const HopeMemoryArgs& a) {
  return hope_validate::Disjoint(
      kOp,
      {{"out", a.out}, {"memory", a.memory}, {"mem_anchor", a.mem_anchor}, {"fast", a.fast},
       {"fast_anchor", a.fast_anchor}, {"momentum", a.momentum}, {"fast_momentum", a.fast_momentum},
       {"conv_q", a.conv_q}, {"conv_k", a.conv_k}, {"conv_v", a.conv_v}},
      {{"x", a.x}, {"q_pre", a.q_pre}, {"beta", a.beta}, {"skip", a.skip}, {"q_conv", a.q_conv},
       {"k_conv", a.k_conv}, {"v_conv", a.v_conv}, {"phase", a.phase}, {"cu_seqlens", a.layout.cu_seqlens},
       {"slot_ids", a.layout.slot_ids}});
}

absl::Status Validate(const Context& ctx, const HopeMemoryArgs& a) {
  MCSERVE_RETURN_IF_ERROR(hope_validate::Options(kOp, a.options));
  MCSERVE_RETURN_IF_ERROR(CheckPresentAndPlaced(ctx, a));
  if (a.x->rank() != 3 || a.x->dim(2) != a.options.head_dim) {
    return Bad(absl::StrCat("x ", a.x->DebugString(), " (want F32 [T, H, d = ", a.options.head_dim, "])"));
  }
  if (a.memory->rank() != 3) return Bad(absl::StrCat("memory ", a.memory->DebugString(), " (want [num_slots, H, Pm])"));
  const int64_t t = a.x->dim(0), h = a.x->dim(1), slots = a.memory->dim(0);
  if (h < 1) return Bad(absl::StrCat("x ", a.x->DebugString(), " needs H >= 1"));
  MCSERVE_RETURN_IF_ERROR(CheckInputs(a, t, h));
  MCSERVE_RETURN_IF_ERROR(CheckState(a, h, slots));
  MCSERVE_RETURN_IF_ERROR(CheckWritten(a));
  MCSERVE_RETURN_IF_ERROR(ValidateBatchLayout(kOp, a.layout, t, slots, ctx.device));
  return hope_validate::Phase(kOp, *a.phase, a.layout.slot_ids->dim(0));
}

}  // namespace

int64_t HopeMemoryParams(const HopeMemoryOptions& o, bool scalar_output) {
  const int64_t d = o.head_dim, e = static_cast<int64_t>(o.expansion) * d;
  return e * d + (scalar_output ? 1 : d) * e;
}

int64_t HopeMemParams(const HopeMemoryOptions& o) { return HopeMemoryParams(o, false); }

int64_t HopeFastParams(const HopeMemoryOptions& o) {
  return (o.adaptive_q ? 3 : 2) * HopeMemoryParams(o, false) + 2 * HopeMemoryParams(o, true);
}

absl::Status HopeMemory(const Context& ctx, const HopeMemoryArgs& args) {
  MCSERVE_RETURN_IF_ERROR(Validate(ctx, args));
  return DispatchOp(ctx, kOp, &internal::HopeMemoryCpu, MCSERVE_CUDA_FN(internal::cuda::HopeMemoryCuda),
                    &internal::cuda_emu::HopeMemoryCuda, args);
}

}  // namespace mcserve::kernels
