#include "kernels/elementwise/elementwise.h"

#include "absl/strings/str_cat.h"
#include "kernels/core/dispatch.h"
#include "base/status_macros.h"
#include "kernels/core/validate.h"

namespace mcserve::kernels {
namespace {

bool ValidKind(ActivationKind k) {
  switch (k) {
    case ActivationKind::kIdentity:
    case ActivationKind::kSilu:
    case ActivationKind::kSigmoid:
    case ActivationKind::kRelu:
    case ActivationKind::kEluPlusOne:
    case ActivationKind::kGelu:
    case ActivationKind::kGeluTanh:
      return true;
  }
  return false;
}

// Checks that `t` is an F32 tensor shaped like `like` (devices are checked against the context).
absl::Status SameF32(const char* op, const char* name, const Tensor* t, const Tensor& like) {
  if (t == nullptr) return absl::InvalidArgumentError(absl::StrCat(op, ": ", name, " is required"));
  if (t->dtype() != DType::kF32 || t->shape() != like.shape()) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": ", name, " ", t->DebugString(), " (want F32 ", ShapeString(like.shape()), ")"));
  }
  return absl::OkStatus();
}

absl::Status ValidateActivation(const Context& ctx, const ActivationArgs& a) {
  if (!ValidKind(a.kind)) return absl::InvalidArgumentError("Activation: unknown kind");
  MCSERVE_RETURN_IF_ERROR(CheckOnDevice("Activation", ctx.device, {{"x", a.x}, {"out", a.out}}));
  if (a.x == nullptr || a.x->dtype() != DType::kF32) {
    return absl::InvalidArgumentError(
        absl::StrCat("Activation: x ", a.x == nullptr ? "missing" : a.x->DebugString(), " (want F32)"));
  }
  if (absl::Status s = SameF32("Activation", "out", a.out, *a.x); !s.ok()) return s;
  return CheckWritable("Activation", "out", *a.out);
}

absl::Status ValidateAdd(const Context& ctx, const AddArgs& a) {
  MCSERVE_RETURN_IF_ERROR(CheckOnDevice("Add", ctx.device, {{"a", a.a}, {"b", a.b}, {"out", a.out}}));
  if (a.a == nullptr || a.a->dtype() != DType::kF32) {
    return absl::InvalidArgumentError(
        absl::StrCat("Add: a ", a.a == nullptr ? "missing" : a.a->DebugString(), " (want F32)"));
  }
  if (absl::Status s = SameF32("Add", "b", a.b, *a.a); !s.ok()) return s;
  if (absl::Status s = SameF32("Add", "out", a.out, *a.a); !s.ok()) return s;
  return CheckWritable("Add", "out", *a.out);
}

absl::Status ValidateSwiGlu(const Context& ctx, const SwiGluArgs& a) {
  MCSERVE_RETURN_IF_ERROR(CheckOnDevice("SwiGlu", ctx.device, {{"gate", a.gate}, {"up", a.up}, {"out", a.out}}));
  if (a.gate == nullptr || a.gate->dtype() != DType::kF32 || a.gate->rank() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("SwiGlu: gate ", a.gate == nullptr ? "missing" : a.gate->DebugString(), " (want F32 [m, I])"));
  }
  if (absl::Status s = SameF32("SwiGlu", "up", a.up, *a.gate); !s.ok()) return s;
  if (absl::Status s = SameF32("SwiGlu", "out", a.out, *a.gate); !s.ok()) return s;
  if (!ValidKind(a.act)) return absl::InvalidArgumentError("SwiGlu: unknown activation kind");
  return CheckWritable("SwiGlu", "out", *a.out);
}

}  // namespace

absl::Status Activation(const Context& ctx, const ActivationArgs& args) {
  MCSERVE_RETURN_IF_ERROR(ValidateActivation(ctx, args));
  return DispatchOp(ctx, "Activation", &internal::ActivationCpu, MCSERVE_CUDA_FN(internal::cuda::ActivationCuda),
                    &internal::cuda_emu::ActivationCuda, args);
}

absl::Status Add(const Context& ctx, const AddArgs& args) {
  MCSERVE_RETURN_IF_ERROR(ValidateAdd(ctx, args));
  return DispatchOp(ctx, "Add", &internal::AddCpu, MCSERVE_CUDA_FN(internal::cuda::AddCuda),
                    &internal::cuda_emu::AddCuda, args);
}

absl::Status SwiGlu(const Context& ctx, const SwiGluArgs& args) {
  MCSERVE_RETURN_IF_ERROR(ValidateSwiGlu(ctx, args));
  return DispatchOp(ctx, "SwiGlu", &internal::SwiGluCpu, MCSERVE_CUDA_FN(internal::cuda::SwiGluCuda),
                    &internal::cuda_emu::SwiGluCuda, args);
}

}  // namespace mcserve::kernels
