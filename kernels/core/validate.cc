#include "kernels/core/validate.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/core/tensor_data.h"

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

absl::Status CheckTensor(const char* op, absl::string_view name, const Tensor& t, DType dtype, const Shape& shape,
                         const char* want) {
  if (t.dtype() == dtype && t.shape() == shape) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(op, ": ", name, " ", t.DebugString(), " (want ", DTypeName(dtype),
                                                 " ", ShapeString(shape), " ", want, ")"));
}

std::string ListItem::Name() const { return absl::StrCat(list, "[", index, "]", field); }

absl::Status CheckArg(const char* op, const char* name, const Tensor& t, Device device, const TensorSpec& spec) {
  MCSERVE_RETURN_IF_ERROR(CheckOnDevice(op, name, t, device));
  return CheckTensor(op, name, t, spec.dtype, spec.shape, spec.want);
}

bool Overlaps(const Tensor& a, const Tensor& b) {
  if (a.nbytes() == 0 || b.nbytes() == 0) return false;
  const auto* pa = static_cast<const char*>(RawData(a));
  const auto* pb = static_cast<const char*>(RawData(b));
  return pa < pb + b.nbytes() && pb < pa + a.nbytes();
}

bool IsFloatDType(DType dtype) { return dtype == DType::kF32 || dtype == DType::kBF16 || dtype == DType::kF16; }

}  // namespace mcserve::kernels
