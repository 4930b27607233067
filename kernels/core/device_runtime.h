// DeviceRuntime: what a non-CPU backend provides to the rest of the kernels library — device memory
// (a caching allocator: no allocation call per step), copies between host and device, ordering,
// and the one GEMM entry point. Implemented over CUDA (kernels/cuda/cuda_runtime.cu, only when
// built with nvcc) and by the CUDA emulator (kernels/cuda/emu/, always built), so every CUDA code
// path runs in tests on machines without a GPU. Thread-safe: allocation and copies may be called
// from any thread (the engine calls them from the engine loop thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/core/dtype.h"

namespace mcserve::kernels {

// C[m, n] (+)= A[m, k] · B[n, k]ᵀ per batch entry, row-major, FP32 accumulation and output.
// A is F32; B may be F32, F16 or BF16 (weights). Strides are in elements between batch entries.
struct DeviceGemmArgs {
  int64_t m = 0, n = 0, k = 0;
  int64_t batch = 1;
  const float* a = nullptr;   // [batch][m, k]
  const void* b = nullptr;    // [batch][n, k], dtype b_dtype
  DType b_dtype = DType::kF32;
  float* c = nullptr;         // [batch][m, n]
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  bool accumulate = false;    // C += A·Bᵀ
};

class DeviceRuntime {
 public:
  virtual ~DeviceRuntime() = default;

  // Device memory of at least `bytes` bytes (64-byte aligned), from the caching allocator.
  virtual absl::StatusOr<void*> Allocate(size_t bytes) = 0;
  // Returns memory from Allocate to the cache.
  virtual void Free(void* ptr) = 0;
  // Bytes currently handed out, and held by the cache in total.
  virtual size_t bytes_in_use() const = 0;
  virtual size_t bytes_reserved() const = 0;

  virtual absl::Status CopyHostToDevice(void* dst, const void* src, size_t bytes) = 0;
  virtual absl::Status CopyDeviceToHost(void* dst, const void* src, size_t bytes) = 0;
  virtual absl::Status CopyDeviceToDevice(void* dst, const void* src, size_t bytes) = 0;
  // Sets `bytes` of device memory to zero.
  virtual absl::Status Zero(void* dst, size_t bytes) = 0;
  // Waits until all work issued so far has finished, kernels on native_stream() included.
  virtual absl::Status Synchronize() = 0;

  // The stream every kernel must launch on (a cudaStream_t for CUDA): the one stream the copies,
  // Zero and Gemm are issued on, so all device work is ordered as issued and Synchronize and
  // CopyDeviceToHost wait for the kernels too. nullptr when the runtime has no streams (the
  // emulator, whose launches are synchronous). Kernels get it through KernelStream()
  // (kernels/cuda/cuda_compat.h). Any thread.
  virtual void* native_stream() const { return nullptr; }

  virtual absl::Status Gemm(const DeviceGemmArgs& args) = 0;
};

// The runtime of `device` (kCuda or kCudaEmu): Unimplemented("built without CUDA") for kCuda in a
// build without nvcc, Unavailable when no GPU is present, InvalidArgument for kCpu.
absl::StatusOr<DeviceRuntime*> RuntimeFor(Device device);

// The device a command line names: "cpu", "cuda", "cuda-emu", or "" for the default (cuda when a
// GPU is usable, else cpu). InvalidArgument for any other name.
absl::StatusOr<Device> DeviceFromName(const std::string& name);

}  // namespace mcserve::kernels
