#include "kernels/deep_memory/deep_memory.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/core/dispatch.h"
#include "base/status_macros.h"
#include "kernels/core/tensor_data.h"
#include "kernels/core/validate.h"

namespace mcserve::kernels {
namespace {

constexpr char kOp[] = "DeepMemory";
constexpr char kAccOp[] = "DeepMemoryAccumulate";

absl::Status Bad(const char* op, const std::string& msg) {
  return absl::InvalidArgumentError(absl::StrCat(op, ": ", msg));
}

// An optional tensor: must be null when !used, present when required, else F32 `shape`.
absl::Status CheckOptional(const char* name, const Tensor* t, bool used, bool required, const Shape& shape,
                           const char* want, const char* why) {
  if (t == nullptr) return required ? Bad(kOp, absl::StrCat(name, " is required ", why)) : absl::OkStatus();
  if (!used) return Bad(kOp, absl::StrCat(name, " is not used ", why, " (pass null)"));
  return CheckTensor(kOp, name, *t, DType::kF32, shape, want);
}

const char* RuleName(DeepMemoryRule r) {
  switch (r) {
    case DeepMemoryRule::kDla: return "dla";
    case DeepMemoryRule::kTitans: return "titans";
  }
  return nullptr;
}

absl::Status Validate(const Context& ctx, const DeepMemoryArgs& a) {
  const char* rule = RuleName(a.rule);
  if (rule == nullptr) return Bad(kOp, "unknown rule");
  if (a.q == nullptr || a.k == nullptr || a.v == nullptr || a.step == nullptr || a.memory == nullptr ||
      a.out == nullptr) {
    return Bad(kOp, "q, k, v, step, memory and out are required");
  }
  if (a.expansion < 1) return Bad(kOp, absl::StrCat("expansion = ", a.expansion, " (want >= 1)"));
  if (a.inner_chunk_size < 1) {
    return Bad(kOp, absl::StrCat("inner_chunk_size = ", a.inner_chunk_size, " (want >= 1)"));
  }
  MCSERVE_RETURN_IF_ERROR(CheckOnDevice(kOp, ctx.device,
                                        {{"q", a.q},
                                         {"k", a.k},
                                         {"v", a.v},
                                         {"step", a.step},
                                         {"retention", a.retention},
                                         {"momentum_gate", a.momentum_gate},
                                         {"ln_weight", a.ln_weight},
                                         {"ln_bias", a.ln_bias},
                                         {"inner_offset", a.inner_offset},
                                         {"memory", a.memory},
                                         {"momentum", a.momentum},
                                         {"anchor", a.anchor},
                                         {"out", a.out}}));
  const Tensor& q = *a.q;
  if (q.rank() != 3 || q.dtype() != DType::kF32) return Bad(kOp, absl::StrCat("q ", q.DebugString(), " (want F32 [T, H, d])"));
  const int64_t t = q.dim(0), h = q.dim(1), d = q.dim(2);
  const int64_t p = 2 * static_cast<int64_t>(a.expansion) * d * d;
  MCSERVE_RETURN_IF_ERROR(CheckTensor(kOp, "k", *a.k, DType::kF32, {t, h, d}, "[T, H, d]"));
  MCSERVE_RETURN_IF_ERROR(CheckTensor(kOp, "v", *a.v, DType::kF32, {t, h, d}, "[T, H, d]"));
  MCSERVE_RETURN_IF_ERROR(CheckTensor(kOp, "step", *a.step, DType::kF32, {t, h}, "[T, H]"));
  MCSERVE_RETURN_IF_ERROR(CheckTensor(kOp, "out", *a.out, DType::kF32, {t, h, d}, "[T, H, d]"));
  const bool titans = a.rule == DeepMemoryRule::kTitans;
  char by_rule[64];  // the messages' context, on the stack: a valid call allocates nothing
  std::snprintf(by_rule, sizeof(by_rule), "by rule %s", rule);
  MCSERVE_RETURN_IF_ERROR(
      CheckOptional("retention", a.retention, titans, titans, {t, h}, "[T, H]", by_rule));
  MCSERVE_RETURN_IF_ERROR(
      CheckOptional("momentum_gate", a.momentum_gate, titans, titans, {t, h}, "[T, H]", by_rule));
  if ((a.ln_weight == nullptr) != (a.ln_bias == nullptr)) {
    return Bad(kOp, "ln_weight and ln_bias go together (both or neither)");
  }
  if (a.ln_weight != nullptr) {
    MCSERVE_RETURN_IF_ERROR(CheckTensor(kOp, "ln_weight", *a.ln_weight, DType::kF32, {h, d}, "[H, d]"));
    MCSERVE_RETURN_IF_ERROR(CheckTensor(kOp, "ln_bias", *a.ln_bias, DType::kF32, {h, d}, "[H, d]"));
    if (!(a.ln_eps > 0.0f) || !std::isfinite(a.ln_eps)) {
      return Bad(kOp, absl::StrCat("ln_eps = ", a.ln_eps, " (want finite > 0)"));
    }
  }
  const Tensor& memory = *a.memory;
  if (memory.rank() != 3) {
    return Bad(kOp, absl::StrCat("memory ", memory.DebugString(), " (want F32 [num_slots, H, P = 2·expansion·d²])"));
  }
  const int64_t slots = memory.dim(0);
  MCSERVE_RETURN_IF_ERROR(CheckTensor(kOp, "memory", memory, DType::kF32, {slots, h, p},
                                      "[num_slots, H, P = 2·expansion·d²]"));
  MCSERVE_RETURN_IF_ERROR(CheckOptional("momentum", a.momentum, titans, titans, {slots, h, p},
                                        "[num_slots, H, P]", by_rule));
  const bool chunked = a.inner_chunk_size > 1;
  char by_chunk[64];
  std::snprintf(by_chunk, sizeof(by_chunk), "with inner_chunk_size %d", a.inner_chunk_size);
  MCSERVE_RETURN_IF_ERROR(
      CheckOptional("anchor", a.anchor, chunked, chunked, {slots, h, p}, "[num_slots, H, P]", by_chunk));
  MCSERVE_RETURN_IF_ERROR(CheckWritable(kOp, "memory", memory));
  MCSERVE_RETURN_IF_ERROR(CheckWritable(kOp, "out", *a.out));
  if (a.momentum != nullptr) MCSERVE_RETURN_IF_ERROR(CheckWritable(kOp, "momentum", *a.momentum));
  if (a.anchor != nullptr) MCSERVE_RETURN_IF_ERROR(CheckWritable(kOp, "anchor", *a.anchor));
  MCSERVE_RETURN_IF_ERROR(ValidateBatchLayout(kOp, a.layout, t, slots, ctx.device));
  const int64_t num_seqs = a.layout.slot_ids->dim(0);
  if (chunked && a.inner_offset == nullptr) {
    return Bad(kOp, absl::StrCat("inner_offset is required ", by_chunk));
  }
  if (a.inner_offset != nullptr) {
    MCSERVE_RETURN_IF_ERROR(CheckTensor(kOp, "inner_offset", *a.inner_offset, DType::kI32, {num_seqs}, "[B]"));
    if (chunked && a.inner_offset->device() == Device::kCpu) {  // device values: checked by the kernel
      const int32_t* off = Data<int32_t>(*a.inner_offset);
      for (int64_t i = 0; i < num_seqs; ++i) {
        if (off[i] < 0 || off[i] >= a.inner_chunk_size) {
          return Bad(kOp, absl::StrCat("inner_offset[", i, "] = ", off[i], " outside [0, inner_chunk_size = ",
                                       a.inner_chunk_size, ")"));
        }
      }
    }
  }
  // Written tensors must not share storage with each other or with any input.
  const std::pair<const char*, const Tensor*> written[] = {
      {"out", a.out}, {"memory", a.memory}, {"momentum", a.momentum}, {"anchor", a.anchor}};
  const std::pair<const char*, const Tensor*> all[] = {
      {"q", a.q}, {"k", a.k}, {"v", a.v}, {"step", a.step}, {"retention", a.retention},
      {"momentum_gate", a.momentum_gate}, {"ln_weight", a.ln_weight}, {"ln_bias", a.ln_bias},
      {"inner_offset", a.inner_offset}, {"cu_seqlens", a.layout.cu_seqlens}, {"slot_ids", a.layout.slot_ids},
      {"out", a.out}, {"memory", a.memory}, {"momentum", a.momentum}, {"anchor", a.anchor}};
  for (const auto& [wname, w] : written) {
    if (w == nullptr) continue;
    for (const auto& [name, other] : all) {
      if (other == nullptr || std::string_view(name) == wname) continue;
      if (Overlaps(*w, *other)) return Bad(kOp, absl::StrCat(wname, " overlaps ", name));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateAccumulate(const Context& ctx, const DeepMemoryAccumulateArgs& a) {
  if (a.memory == nullptr || a.slot_ids == nullptr || a.sum == nullptr) {
    return Bad(kAccOp, "memory, slot_ids and sum are required");
  }
  MCSERVE_RETURN_IF_ERROR(
      CheckOnDevice(kAccOp, ctx.device, {{"memory", a.memory}, {"slot_ids", a.slot_ids}, {"sum", a.sum}}));
  const Tensor& memory = *a.memory;
  if (memory.rank() != 3 || memory.dtype() != DType::kF32) {
    return Bad(kAccOp, absl::StrCat("memory ", memory.DebugString(), " (want F32 [num_slots, H, P])"));
  }
  const int64_t slots = memory.dim(0);
  MCSERVE_RETURN_IF_ERROR(CheckTensor(kAccOp, "sum", *a.sum, DType::kF32, memory.shape(), "[num_slots, H, P]"));
  MCSERVE_RETURN_IF_ERROR(CheckWritable(kAccOp, "sum", *a.sum));
  if (a.slot_ids->rank() != 1) {
    return Bad(kAccOp, absl::StrCat("slot_ids ", a.slot_ids->DebugString(), " (want I32 [B])"));
  }
  MCSERVE_RETURN_IF_ERROR(CheckTensor(kAccOp, "slot_ids", *a.slot_ids, DType::kI32, a.slot_ids->shape(), "[B]"));
  if (Overlaps(*a.sum, memory)) return Bad(kAccOp, "sum overlaps memory");
  if (Overlaps(*a.sum, *a.slot_ids)) return Bad(kAccOp, "sum overlaps slot_ids");
  if (a.slot_ids->device() != Device::kCpu) return absl::OkStatus();  // device values: checked by the kernel
  MCSERVE_ASSIGN_OR_RETURN(std::vector<int32_t> ids, a.slot_ids->ToHostI32());
  std::vector<bool> used(slots, false);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= slots) {
      return Bad(kAccOp, absl::StrCat("slot_ids[", i, "] = ", ids[i], " outside [0, ", slots, ")"));
    }
    if (used[ids[i]]) return Bad(kAccOp, absl::StrCat("slot_ids[", i, "] = ", ids[i], " repeats a slot"));
    used[ids[i]] = true;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status DeepMemory(const Context& ctx, const DeepMemoryArgs& args) {
  MCSERVE_RETURN_IF_ERROR(Validate(ctx, args));
  return DispatchOp(ctx, kOp, &internal::DeepMemoryCpu, MCSERVE_CUDA_FN(internal::cuda::DeepMemoryCuda),
                    &internal::cuda_emu::DeepMemoryCuda, args);
}

absl::Status DeepMemoryAccumulate(const Context& ctx, const DeepMemoryAccumulateArgs& args) {
  MCSERVE_RETURN_IF_ERROR(ValidateAccumulate(ctx, args));
  return DispatchOp(ctx, kAccOp, &internal::DeepMemoryAccumulateCpu,
                    MCSERVE_CUDA_FN(internal::cuda::DeepMemoryAccumulateCuda),
                    &internal::cuda_emu::DeepMemoryAccumulateCuda, args);
}

}  // namespace mcserve::kernels
