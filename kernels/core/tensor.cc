#include "kernels/core/tensor.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "kernels/core/tensor_data.h"
#include "kernels/core/device_runtime.h"
#include "kernels/core/host_block_cache.h"

namespace mcserve::kernels {
namespace {

// Device storage of `nbytes` bytes, zeroed, from the device's caching allocator.
absl::StatusOr<std::shared_ptr<void>> AllocateDevice(Device device, int64_t nbytes) {
  MCSERVE_ASSIGN_OR_RETURN(DeviceRuntime * runtime, RuntimeFor(device));
  MCSERVE_ASSIGN_OR_RETURN(void* p, runtime->Allocate(std::max<int64_t>(nbytes, 1)));
  std::shared_ptr<void> storage(p, [runtime](void* q) { runtime->Free(q); });
  MCSERVE_RETURN_IF_ERROR(runtime->Zero(p, nbytes));
  return storage;
}

// Host storage of `nbytes` bytes, zeroed (or as `fill` says when it is a block reused from the
// thread's HostBlockCache, where one is installed).
absl::StatusOr<std::shared_ptr<void>> AllocateHost(int64_t nbytes, HostBlockCache::Fill fill) {
  if (HostBlockCache* cache = HostBlockCache::Current()) {
    if (std::shared_ptr<void> block = cache->Acquire(static_cast<size_t>(nbytes), fill)) return block;
  }
  std::shared_ptr<void> block = AllocateHostBlock(static_cast<size_t>(nbytes));
  if (block == nullptr) return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", nbytes, " bytes"));
  return block;
}

// Host bytes into t's storage (t on any device).
absl::Status CopyIn(const Tensor& t, const void* src, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  if (t.device() == Device::kCpu) {
    std::memcpy(RawData(t), src, bytes);
    return absl::OkStatus();
  }
  MCSERVE_ASSIGN_OR_RETURN(DeviceRuntime * runtime, RuntimeFor(t.device()));
  return runtime->CopyHostToDevice(RawData(t), src, bytes);
}

// t's storage into host bytes.
absl::Status CopyOut(const Tensor& t, void* dst, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  if (t.device() == Device::kCpu) {
    std::memcpy(dst, RawData(t), bytes);
    return absl::OkStatus();
  }
  MCSERVE_ASSIGN_OR_RETURN(DeviceRuntime * runtime, RuntimeFor(t.device()));
  return runtime->CopyDeviceToHost(dst, RawData(t), bytes);
}

}  // namespace

const char* DTypeName(DType t) {
  switch (t) {
    case DType::kF32: return "F32";
    case DType::kF16: return "F16";
    case DType::kBF16: return "BF16";
    case DType::kI32: return "I32";
  }
  return "?";
}

const char* DeviceName(Device d) {
  switch (d) {
    case Device::kCpu: return "cpu";
    case Device::kCuda: return "cuda";
    case Device::kCudaEmu: return "cuda-emu";
  }
  return "?";
}

std::string ShapeString(const Shape& shape) { return absl::StrCat("[", absl::StrJoin(shape, ", "), "]"); }

absl::StatusOr<Tensor> Tensor::Zeros(DType dtype, Shape shape, Device device) {
  return Allocate(dtype, std::move(shape), device, HostBlockCache::Fill::kZeros);
}

absl::StatusOr<Tensor> Tensor::ForOverwrite(DType dtype, Shape shape, Device device) {
  return Allocate(dtype, std::move(shape), device, HostBlockCache::Fill::kUnspecified);
}

absl::StatusOr<Tensor> Tensor::Allocate(DType dtype, Shape shape, Device device, HostBlockCache::Fill fill) {
  for (int64_t d : shape) {
    if (d < 0) return absl::InvalidArgumentError(absl::StrCat("negative dimension in ", ShapeString(shape)));
  }
  Tensor t;
  t.dtype_ = dtype;
  t.device_ = device;
  t.shape_ = std::move(shape);
  auto storage = device == Device::kCpu ? AllocateHost(t.nbytes(), fill) : AllocateDevice(device, t.nbytes());
  if (!storage.ok()) return storage.status();
  t.data_ = storage->get();
  t.owner_ = std::move(*storage);
  return t;
}

Tensor Tensor::WrapHost(const void* data, DType dtype, Shape shape, std::shared_ptr<const void> owner) {
  Tensor t;
  t.data_ = const_cast<void*>(data);
  t.dtype_ = dtype;
  t.device_ = Device::kCpu;
  t.shape_ = std::move(shape);
  t.owner_ = std::move(owner);
  t.read_only_ = true;
  return t;
}

absl::StatusOr<Tensor> Tensor::FromHost(std::span<const float> values, Shape shape, Device device) {
  if (NumElements(shape) != static_cast<int64_t>(values.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("FromHost: ", values.size(), " values for shape ", ShapeString(shape)));
  }
  auto t = Zeros(DType::kF32, std::move(shape), device);
  if (!t.ok()) return t.status();
  MCSERVE_RETURN_IF_ERROR(CopyIn(*t, values.data(), values.size() * sizeof(float)));
  return t;
}

absl::StatusOr<Tensor> Tensor::FromHostI32(std::span<const int32_t> values, Shape shape, Device device) {
  if (NumElements(shape) != static_cast<int64_t>(values.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("FromHostI32: ", values.size(), " values for shape ", ShapeString(shape)));
  }
  auto t = Zeros(DType::kI32, std::move(shape), device);
  if (!t.ok()) return t.status();
  MCSERVE_RETURN_IF_ERROR(CopyIn(*t, values.data(), values.size() * sizeof(int32_t)));
  return t;
}

absl::StatusOr<std::vector<float>> Tensor::ToHostF32() const {
  std::vector<float> out(numel());
  if (dtype_ == DType::kF32) {
    MCSERVE_RETURN_IF_ERROR(CopyOut(*this, out.data(), out.size() * sizeof(float)));
    return out;
  }
  std::vector<uint16_t> raw(dtype_ == DType::kI32 ? 0 : numel());
  if (!raw.empty()) MCSERVE_RETURN_IF_ERROR(CopyOut(*this, raw.data(), raw.size() * sizeof(uint16_t)));
  switch (dtype_) {
    case DType::kF32:
      break;
    case DType::kBF16: {
      const uint16_t* p = raw.data();
      for (size_t i = 0; i < out.size(); ++i) out[i] = Bf16ToF32(p[i]);
      break;
    }
    case DType::kF16: {
      const uint16_t* p = raw.data();
      for (size_t i = 0; i < out.size(); ++i) out[i] = F16ToF32(p[i]);
      break;
    }
    case DType::kI32:
      return absl::InvalidArgumentError(absl::StrCat("ToHostF32 on ", DebugString()));
  }
  return out;
}

absl::StatusOr<std::vector<int32_t>> Tensor::ToHostI32() const {
  if (dtype_ != DType::kI32) return absl::InvalidArgumentError(absl::StrCat("ToHostI32 on ", DebugString()));
  std::vector<int32_t> out(numel());
  MCSERVE_RETURN_IF_ERROR(CopyOut(*this, out.data(), out.size() * sizeof(int32_t)));
  return out;
}

absl::Status Tensor::CopyFromHost(std::span<const float> values) {
  if (dtype_ != DType::kF32 || read_only_ || static_cast<int64_t>(values.size()) != numel()) {
    return absl::InvalidArgumentError(
        absl::StrCat("CopyFromHost of ", values.size(), " floats into ", DebugString()));
  }
  return CopyIn(*this, values.data(), values.size() * sizeof(float));
}

absl::Status Tensor::CopyFrom(const Tensor& src) {
  const bool devices_ok = src.device_ == device_ || src.device_ == Device::kCpu || device_ == Device::kCpu;
  if (src.dtype_ != dtype_ || src.numel() != numel() || !devices_ok || read_only_) {
    return absl::InvalidArgumentError(absl::StrCat("CopyFrom ", src.DebugString(), " into ", DebugString()));
  }
  if (nbytes() == 0) return absl::OkStatus();
  if (device_ == Device::kCpu && src.device_ == Device::kCpu) {
    std::memmove(data_, src.data_, nbytes());
    return absl::OkStatus();
  }
  if (src.device_ == Device::kCpu) return CopyIn(*this, src.data_, nbytes());  // host → device
  if (device_ == Device::kCpu) return CopyOut(src, data_, nbytes());          // device → host
  MCSERVE_ASSIGN_OR_RETURN(DeviceRuntime * runtime, RuntimeFor(device_));
  return runtime->CopyDeviceToDevice(data_, src.data_, nbytes());
}

Tensor Tensor::Rows(int64_t begin, int64_t end) const {
  Tensor t = *this;
  int64_t row = shape_.empty() ? 1 : numel() / std::max<int64_t>(shape_[0], 1);
  t.shape_[0] = end - begin;
  t.data_ = static_cast<char*>(data_) + begin * row * DTypeSize(dtype_);
  return t;
}

absl::StatusOr<Tensor> Tensor::Reshape(Shape shape) const {
  if (NumElements(shape) != numel()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot reshape ", DebugString(), " to ", ShapeString(shape)));
  }
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

std::string Tensor::DebugString() const {
  return absl::StrCat(DTypeName(dtype_), ShapeString(shape_), " on ", DeviceName(device_));
}

}  // namespace mcserve::kernels
