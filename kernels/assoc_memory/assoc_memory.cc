#include "kernels/assoc_memory/assoc_memory.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/core/dispatch.h"
#include "kernels/core/validate.h"

namespace mcserve::kernels {
namespace {

absl::Status Bad(const char* op, const std::string& msg) {
  return absl::InvalidArgumentError(absl::StrCat(op, ": ", msg));
}

// A and z: [num_slots, F, D] and [num_slots, F] F32; sets slots, f, d.
absl::Status CheckMemory(const char* op, const Tensor& a, const Tensor& z, int64_t* f, int64_t* d) {
  if (a.rank() != 3) return Bad(op, absl::StrCat("a ", a.DebugString(), " (want [num_slots, F, D])"));
  *f = a.dim(1);
  *d = a.dim(2);
  MCSERVE_RETURN_IF_ERROR(CheckTensor(op, "a", a, DType::kF32, {a.dim(0), *f, *d}, "[num_slots, F, D]"));
  return CheckTensor(op, "z", z, DType::kF32, {a.dim(0), *f}, "[num_slots, F]");
}

absl::Status CheckEps(const char* op, float eps) {
  if (!(std::isfinite(eps) && eps > 0.0f)) return Bad(op, absl::StrCat("eps ", eps, " must be finite and > 0"));
  return absl::OkStatus();
}

absl::Status ValidateRead(const Context& ctx, const AssocReadArgs& a) {
  constexpr const char* kOp = "AssocRead";
  if (a.fq == nullptr || a.a == nullptr || a.z == nullptr || a.h == nullptr) {
    return Bad(kOp, "fq, a, z and h are required");
  }
  MCSERVE_RETURN_IF_ERROR(CheckOnDevice(kOp, ctx.device, {{"fq", a.fq}, {"a", a.a}, {"z", a.z}, {"h", a.h}}));
  int64_t f = 0, d = 0;
  MCSERVE_RETURN_IF_ERROR(CheckMemory(kOp, *a.a, *a.z, &f, &d));
  if (a.fq->rank() != 2) return Bad(kOp, absl::StrCat("fq ", a.fq->DebugString(), " (want [T, F])"));
  const int64_t t = a.fq->dim(0);
  MCSERVE_RETURN_IF_ERROR(CheckTensor(kOp, "fq", *a.fq, DType::kF32, {t, f}, "[T, F]"));
  MCSERVE_RETURN_IF_ERROR(CheckTensor(kOp, "h", *a.h, DType::kF32, {t, d}, "[T, D]"));
  MCSERVE_RETURN_IF_ERROR(CheckWritable(kOp, "h", *a.h));
  for (const NamedTensor& o : {NamedTensor{"fq", a.fq}, NamedTensor{"a", a.a}, NamedTensor{"z", a.z}}) {
    if (Overlaps(*a.h, *o.tensor)) return Bad(kOp, absl::StrCat("h overlaps ", o.name));
  }
  MCSERVE_RETURN_IF_ERROR(CheckEps(kOp, a.eps));
  return ValidateBatchLayout(kOp, a.layout, t, a.a->dim(0), ctx.device);
}

absl::Status CheckWriteShapes(const AssocWriteArgs& a, int64_t f, int64_t d) {
  constexpr const char* kOp = "AssocWrite";
  if (a.fk->rank() != 2) return Bad(kOp, absl::StrCat("fk ", a.fk->DebugString(), " (want [T, F])"));
  const int64_t t = a.fk->dim(0);
  MCSERVE_RETURN_IF_ERROR(CheckTensor(kOp, "fk", *a.fk, DType::kF32, {t, f}, "[T, F]"));
  MCSERVE_RETURN_IF_ERROR(CheckTensor(kOp, "vn", *a.vn, DType::kF32, {t, d}, "[T, D]"));
  MCSERVE_RETURN_IF_ERROR(CheckTensor(kOp, "beta", *a.beta, DType::kF32, {t}, "[T]"));
  MCSERVE_RETURN_IF_ERROR(CheckTensor(kOp, "delta", *a.delta, DType::kF32, {t, d}, "[T, D]"));
  return CheckTensor(kOp, "gamma", *a.gamma, DType::kF32, {t}, "[T]");
}

absl::Status ValidateWrite(const Context& ctx, const AssocWriteArgs& a) {
  constexpr const char* kOp = "AssocWrite";
  if (a.fk == nullptr || a.vn == nullptr || a.beta == nullptr || a.first == nullptr || a.delta == nullptr ||
      a.gamma == nullptr || a.a == nullptr || a.z == nullptr) {
    return Bad(kOp, "fk, vn, beta, first, delta, gamma, a and z are required");
  }
  MCSERVE_RETURN_IF_ERROR(CheckOnDevice(kOp, ctx.device,
                                        {{"fk", a.fk}, {"vn", a.vn}, {"beta", a.beta}, {"first", a.first},
                                         {"delta", a.delta}, {"gamma", a.gamma}, {"a", a.a}, {"z", a.z}}));
  int64_t f = 0, d = 0;
  MCSERVE_RETURN_IF_ERROR(CheckMemory(kOp, *a.a, *a.z, &f, &d));
  MCSERVE_RETURN_IF_ERROR(CheckWriteShapes(a, f, d));
  const NamedTensor outs[] = {{"delta", a.delta}, {"gamma", a.gamma}, {"a", a.a}, {"z", a.z}};
  const NamedTensor all[] = {{"fk", a.fk}, {"vn", a.vn}, {"beta", a.beta}, {"first", a.first},
                             {"delta", a.delta}, {"gamma", a.gamma}, {"a", a.a}, {"z", a.z}};
  for (const NamedTensor& o : outs) {
    MCSERVE_RETURN_IF_ERROR(CheckWritable(kOp, o.name, *o.tensor));
    for (const NamedTensor& x : all) {
      if (std::string(x.name) != o.name && Overlaps(*o.tensor, *x.tensor)) {
        return Bad(kOp, absl::StrCat(o.name, " overlaps ", x.name));
      }
    }
  }
  MCSERVE_RETURN_IF_ERROR(CheckEps(kOp, a.eps));
  MCSERVE_RETURN_IF_ERROR(ValidateBatchLayout(kOp, a.layout, a.fk->dim(0), a.a->dim(0), ctx.device));
  return CheckTensor(kOp, "first", *a.first, DType::kI32, {a.layout.slot_ids->dim(0)}, "[B]");
}

}  // namespace

absl::Status AssocRead(const Context& ctx, const AssocReadArgs& args) {
  MCSERVE_RETURN_IF_ERROR(ValidateRead(ctx, args));
  return DispatchOp(ctx, "AssocRead", &internal::AssocReadCpu, MCSERVE_CUDA_FN(internal::cuda::AssocReadCuda),
                    &internal::cuda_emu::AssocReadCuda, args);
}

absl::Status AssocWrite(const Context& ctx, const AssocWriteArgs& args) {
  MCSERVE_RETURN_IF_ERROR(ValidateWrite(ctx, args));
  return DispatchOp(ctx, "AssocWrite", &internal::AssocWriteCpu, MCSERVE_CUDA_FN(internal::cuda::AssocWriteCuda),
                    &internal::cuda_emu::AssocWriteCuda, args);
}

}  // namespace mcserve::kernels
