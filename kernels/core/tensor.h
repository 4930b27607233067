// Tensor: a typed, shaped, contiguous (row-major) buffer that records the device it lives on.
// Code outside kernels/ never touches element data directly: it copies to or from the host
// explicitly (ToHostF32, FromHost), so the engine is the same on every backend.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "kernels/core/dtype.h"
#include "kernels/core/host_block_cache.h"

namespace mcserve::kernels {

// Up to 6 dimensions inline: shapes are made and copied on every op of a step, without allocating.
using Shape = absl::InlinedVector<int64_t, 6>;

// Number of elements of a shape (1 for a rank-0 shape). Inline: validation asks it of every page a
// decode step reads.
inline int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}
// "[2, 3, 4]"
std::string ShapeString(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;

  // Allocates a zero-filled tensor on `device`.
  static absl::StatusOr<Tensor> Zeros(DType dtype, Shape shape, Device device);
  // Allocates a tensor whose contents are unspecified, for an op's output that the op writes whole
  // before anything reads it: a host block reused from the thread's HostBlockCache is not zeroed
  // (HostBlockCache::Fill::kUnspecified); otherwise as Zeros.
  static absl::StatusOr<Tensor> ForOverwrite(DType dtype, Shape shape, Device device);
  // Wraps read-only host memory (e.g. an mmapped weight) kept alive by `owner`; no copy.
  static Tensor WrapHost(const void* data, DType dtype, Shape shape, std::shared_ptr<const void> owner);
  // Copies host floats into a new F32 tensor on `device`.
  static absl::StatusOr<Tensor> FromHost(std::span<const float> values, Shape shape, Device device);
  // Copies host ints into a new I32 tensor on `device`.
  static absl::StatusOr<Tensor> FromHostI32(std::span<const int32_t> values, Shape shape, Device device);

  // Explicit copies to the host; F16/BF16 are widened to float.
  absl::StatusOr<std::vector<float>> ToHostF32() const;
  absl::StatusOr<std::vector<int32_t>> ToHostI32() const;
  // Overwrites this tensor's contents from host floats (F32 tensors only; sizes must match).
  absl::Status CopyFromHost(std::span<const float> values);
  // Copies all of `src` (same dtype and numel) into this tensor: within a device, or between the host
  // and a device (never between two different devices).
  absl::Status CopyFrom(const Tensor& src);

  // A view of rows [begin, end) of the first dimension; shares storage.
  Tensor Rows(int64_t begin, int64_t end) const;
  // A view with a new shape of the same number of elements; shares storage.
  absl::StatusOr<Tensor> Reshape(Shape shape) const;

  bool defined() const { return data_ != nullptr || NumElements(shape_) == 0; }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int i) const { return shape_[i < 0 ? shape_.size() + i : i]; }
  int64_t numel() const { return NumElements(shape_); }
  int64_t nbytes() const { return numel() * DTypeSize(dtype_); }
  bool read_only() const { return read_only_; }
  // "F32[2, 3] on cpu", for error messages.
  std::string DebugString() const;

 private:
  friend inline void* RawData(const Tensor& t);  // defined in tensor_data.h (kernels/ only)
  // Zeros and ForOverwrite: host blocks filled as `fill` says, device memory zeroed.
  static absl::StatusOr<Tensor> Allocate(DType dtype, Shape shape, Device device, HostBlockCache::Fill fill);
  std::shared_ptr<const void> owner_;  // keeps storage alive
  void* data_ = nullptr;
  DType dtype_ = DType::kF32;
  Device device_ = Device::kCpu;
  Shape shape_;
  bool read_only_ = false;
};

// A few tensors made or passed together (the projections of one input, the rows a pass selects):
// up to 8 inline, so a decode step builds them without allocating.
using TensorList = absl::InlinedVector<Tensor, 8>;
using TensorPtrList = absl::InlinedVector<const Tensor*, 8>;

}  // namespace mcserve::kernels
