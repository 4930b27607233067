// HopeMemWrite (hope_mem_write.h): validation and dispatch.
#include "kernels/hope_memory/hope_mem_write.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/core/dispatch.h"
#include "kernels/core/validate.h"
#include "kernels/hope_memory/hope_validate.h"

namespace mcserve::kernels {
namespace {

constexpr char kOp[] = "HopeMemWrite";

absl::Status CheckPresentAndPlaced(const Context& ctx, const HopeMemWriteArgs& a) {
  if (a.q == nullptr || a.k == nullptr || a.v == nullptr || a.alpha == nullptr || a.eta == nullptr ||
      a.phase == nullptr || a.memory == nullptr || a.mem_anchor == nullptr || a.out == nullptr) {
    return hope_validate::Bad(kOp, "q, k, v, alpha, eta, phase, memory, mem_anchor and out are required");
  }
  return CheckOnDevice(kOp, ctx.device,
                       {{"q", a.q}, {"k", a.k}, {"v", a.v}, {"alpha", a.alpha}, {"eta", a.eta}, {"beta", a.beta},
                        {"phase", a.phase}, {"memory", a.memory}, {"mem_anchor", a.mem_anchor},
                        {"momentum", a.momentum}, {"read_weights", a.read_weights}, {"out", a.out}});
}

absl::Status CheckShapes(const HopeMemWriteArgs& a, int64_t t, int64_t h, int64_t slots) {
  const HopeMemoryOptions& o = a.options;
  const int64_t d = o.head_dim, pm = HopeMemParams(o);
  for (const auto& [name, f] : {std::pair{"k", a.k}, {"v", a.v}, {"out", a.out}}) {
    MCSERVE_RETURN_IF_ERROR(CheckTensor(kOp, name, *f, DType::kF32, {t, h, d}, "[T, H, d]"));
  }
  MCSERVE_RETURN_IF_ERROR(CheckTensor(kOp, "alpha", *a.alpha, DType::kF32, {t, h}, "[T, H]"));
  MCSERVE_RETURN_IF_ERROR(CheckTensor(kOp, "eta", *a.eta, DType::kF32, {t, h}, "[T, H]"));
  const bool data = o.momentum == HopeMomentum::kData;
  MCSERVE_RETURN_IF_ERROR(hope_validate::Optional(kOp, "beta", a.beta, data, {t, h}, "[T, H]",
                                                  data ? "with momentum data" : "unless momentum data"));
  MCSERVE_RETURN_IF_ERROR(CheckTensor(kOp, "memory", *a.memory, DType::kF32, {slots, h, pm}, "[num_slots, H, Pm]"));
  MCSERVE_RETURN_IF_ERROR(
      CheckTensor(kOp, "mem_anchor", *a.mem_anchor, DType::kF32, {slots, h, pm}, "[num_slots, H, Pm]"));
  const bool mom = o.momentum != HopeMomentum::kNone;
  MCSERVE_RETURN_IF_ERROR(hope_validate::Optional(kOp, "momentum", a.momentum, mom, {slots, h, pm},
                                                  "[num_slots, H, Pm]", mom ? "with momentum" : "without momentum"));
  if (a.read_weights != nullptr) {
    MCSERVE_RETURN_IF_ERROR(
        CheckTensor(kOp, "read_weights", *a.read_weights, DType::kF32, {slots, h, pm}, "[num_slots, H, Pm]"));
  }
  return absl::OkStatus();
}

absl::Status Validate(const Context& ctx, const HopeMemWriteArgs& a) {
  MCSERVE_RETURN_IF_ERROR(hope_validate::Options(kOp, a.options));
  MCSERVE_RETURN_IF_ERROR(CheckPresentAndPlaced(ctx, a));
  if (a.q->rank() != 3 || a.q->dim(2) != a.options.head_dim || a.q->dim(1) < 1) {
    return hope_validate::Bad(kOp, absl::StrCat("q ", a.q->DebugString(), " (want F32 [T, H >= 1, d = ",
                                                a.options.head_dim, "])"));
  }
  MCSERVE_RETURN_IF_ERROR(CheckTensor(kOp, "q", *a.q, DType::kF32, a.q->shape(), "[T, H, d]"));
  if (a.memory->rank() != 3) {
    return hope_validate::Bad(kOp, absl::StrCat("memory ", a.memory->DebugString(), " (want [num_slots, H, Pm])"));
  }
  const int64_t t = a.q->dim(0), h = a.q->dim(1), slots = a.memory->dim(0);
  MCSERVE_RETURN_IF_ERROR(CheckShapes(a, t, h, slots));
  MCSERVE_RETURN_IF_ERROR(hope_validate::Disjoint(
      kOp,
      {{"out", a.out}, {"memory", a.memory}, {"mem_anchor", a.mem_anchor}, {"momentum", a.momentum},
       {"read_weights", a.read_weights}},
      {{"q", a.q}, {"k", a.k}, {"v", a.v}, {"alpha", a.alpha}, {"eta", a.eta}, {"beta", a.beta},
       {"phase", a.phase}, {"cu_seqlens", a.layout.cu_seqlens}, {"slot_ids", a.layout.slot_ids}}));
  MCSERVE_RETURN_IF_ERROR(ValidateBatchLayout(kOp, a.layout, t, slots, ctx.device));
  return hope_validate::Phase(kOp, *a.phase, a.layout.slot_ids->dim(0));
}

}  // namespace

absl::Status HopeMemWrite(const Context& ctx, const HopeMemWriteArgs& args) {
  MCSERVE_RETURN_IF_ERROR(Validate(ctx, args));
  return DispatchOp(ctx, kOp, &internal::HopeMemWriteCpu, MCSERVE_CUDA_FN(internal::cuda::HopeMemWriteCuda),
                    &internal::cuda_emu::HopeMemWriteCuda, args);
}

}  // namespace mcserve::kernels
