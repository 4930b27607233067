#include "kernels/core/validate.h"

#include "absl/strings/str_cat.h"

namespace mcserve::kernels {

absl::Status CheckOnDevice(const char* op, const char* name, const Tensor& t, Device device) {
  if (t.device() == device) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(op, ": ", name, " ", t.DebugString(), ", but the context is on ", DeviceName(device)));
}

absl::Status CheckOnDevice(const char* op, Device device, std::initializer_list<NamedTensor> tensors) {
  for (const NamedTensor& nt : tensors) {
    if (nt.tensor == nullptr) continue;
    if (absl::Status s = CheckOnDevice(op, nt.name, *nt.tensor, device); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status CheckWritable(const char* op, const char* name, const Tensor& t) {
  if (!t.read_only()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(op, ": ", name, " is read-only"));
}

bool IsFloatDType(DType dtype) { return dtype == DType::kF32 || dtype == DType::kBF16 || dtype == DType::kF16; }

}  // namespace mcserve::kernels
