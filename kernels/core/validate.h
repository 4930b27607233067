// Argument checks shared by the ops' validation (<op>.cc, before DispatchOp): that every tensor
// argument lives on the context's device, that outputs are writable, which dtypes weights may use.
// Pure functions of their arguments; any thread.
#pragma once

#include <initializer_list>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "kernels/core/tensor.h"

namespace mcserve::kernels {

// One tensor argument of an op, by the name its args struct gives it; `tensor` may be null (an
// optional argument that was not passed, skipped by the checks).
struct NamedTensor {
  const char* name;
  const Tensor* tensor;
};

// OK when `t` lives on `device` (the op's ctx.device); else InvalidArgument
// "<op>: <name> F32[2, 3] on cpu, but the context is on cuda-emu".
absl::Status CheckOnDevice(const char* op, const char* name, const Tensor& t, Device device);
// CheckOnDevice for each non-null tensor in order; the first failure.
absl::Status CheckOnDevice(const char* op, Device device, std::initializer_list<NamedTensor> tensors);

// OK unless `t` is read-only: InvalidArgument "<op>: <name> is read-only".
absl::Status CheckWritable(const char* op, const char* name, const Tensor& t);

// OK when `t` has exactly `dtype` and `shape`; else InvalidArgument
// "<op>: <name> F32[2, 3] on cpu (want I32 [3] <want>)", `want` naming the dimensions ("[T + 1]").
absl::Status CheckTensor(const char* op, absl::string_view name, const Tensor& t, DType dtype, const Shape& shape,
                         const char* want);

// Element `index` of a list argument, e.g. {"pages", 3, ".memory"} for "pages[3].memory". The checks
// below format it only when they fail, so validating a long list (a decode step's pages) builds no string.
struct ListItem {
  const char* list;
  int64_t index;
  const char* field = "";
  std::string Name() const;
};

// What a tensor argument must be: dtype, shape, and `want` naming the dimensions ("[Hs, K, V]").
struct TensorSpec {
  DType dtype;
  const Shape& shape;
  const char* want;
};

// Whether `t` is on `device` with exactly `spec`'s dtype and shape: the checks' fast path, inline and
// without calls (a read-out checks every page it lists, every token).
inline bool MatchesSpec(const Tensor& t, Device device, const TensorSpec& spec) {
  const Shape& shape = t.shape();
  if (t.device() != device || t.dtype() != spec.dtype || shape.size() != spec.shape.size()) return false;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] != spec.shape[d]) return false;
  }
  return true;
}

// CheckOnDevice, then CheckTensor.
absl::Status CheckArg(const char* op, const char* name, const Tensor& t, Device device, const TensorSpec& spec);
// The same for a list element.
inline absl::Status CheckListTensor(const char* op, const ListItem& item, const Tensor& t, Device device,
                                    const TensorSpec& spec) {
  if (MatchesSpec(t, device, spec)) return absl::OkStatus();
  return CheckArg(op, item.Name().c_str(), t, device, spec);
}

// Whether the storage of a and b overlaps (views of one buffer included; empty tensors never do).
bool Overlaps(const Tensor& a, const Tensor& b);

// True for the floating-point dtypes weights may use: F32, BF16, F16.
bool IsFloatDType(DType dtype);

}  // namespace mcserve::kernels
