// The one header a kernel `.cu` source includes instead of <cuda_runtime.h>, so the same source
// compiles with nvcc (real CUDA) and with the host compiler under MCSERVE_CUDA_EMU (the CUDA
// emulator, kernels/cuda/emu/, run on the CPU in tests). Provides:
//   MCSERVE_LAUNCH(kernel, grid, block, shared_bytes, stream)(args...);   launches a kernel
//   MCSERVE_DYNAMIC_SHARED(T, name);        T* name = the block's dynamic shared memory
//   MCSERVE_CUDA_NS                          `cuda` under nvcc, `cuda_emu` under the emulator
//   mcserve::kernels::MCSERVE_CUDA_NS::TakeLaunchStatus(what)   launch error -> absl::Status
//   mcserve::kernels::MCSERVE_CUDA_NS::KernelStream()   the stream to pass to MCSERVE_LAUNCH
// Put a source's entry points in namespace mcserve::kernels::MCSERVE_CUDA_NS and its kernels in an
// anonymous namespace: both compilations of one source then link into one binary.
// `kernel` must be one token: for a template with several arguments, take a pointer first
// (`auto* k = &MyKernel<float, 4>;`). Under the emulator every launch is synchronous.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/core/device_runtime.h"

#if defined(__CUDACC__)

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#define MCSERVE_CUDA_NS cuda
#define MCSERVE_CUDA_EMULATED 0
#define MCSERVE_LAUNCH(kernel, grid, block, shared_bytes, stream) \
  kernel<<<(grid), (block), (shared_bytes), (stream)>>>
// Declares `T* name` pointing at the dynamic shared memory of the launch (16-byte aligned). One
// buffer per kernel: carve several arrays out of it by offset.
#define MCSERVE_DYNAMIC_SHARED(T, name)                                          \
  extern __shared__ __align__(16) unsigned char mcserve_dynamic_shared_bytes_[]; \
  T* name = reinterpret_cast<T*>(mcserve_dynamic_shared_bytes_)

#elif defined(MCSERVE_CUDA_EMU)

#include "kernels/cuda/emu/emu.h"

#define MCSERVE_CUDA_NS cuda_emu
#define MCSERVE_CUDA_EMULATED 1
#define MCSERVE_LAUNCH(kernel, grid, block, shared_bytes, stream) \
  ::mcserve::kernels::emu::MakeLauncher(kernel, grid, block, shared_bytes, stream)
#define MCSERVE_DYNAMIC_SHARED(T, name) \
  T* name = reinterpret_cast<T*>(::mcserve::kernels::emu::DynamicSharedMemory())

#else
#error "kernels/cuda/cuda_compat.h: compile with nvcc, or define MCSERVE_CUDA_EMU (host compiler)"
#endif

namespace mcserve::kernels::MCSERVE_CUDA_NS {

// OK, or the error of the kernel launches made on this OS thread since the last call (which
// clears it, like cudaGetLastError), prefixed by `what` (e.g. the kernel's name). On a GPU this
// sees configuration errors at once and execution errors after a synchronisation; under the
// emulator launches are synchronous, so it sees both (deadlock, __trap, ...) at once.
inline absl::Status TakeLaunchStatus(const char* what) {
#if MCSERVE_CUDA_EMULATED
  absl::Status s = ::mcserve::kernels::emu::TakeLastError();
  if (s.ok()) return s;
  return absl::Status(s.code(), std::string(what) + ": " + std::string(s.message()));
#else
  const cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(std::string(what) + ": kernel launch failed: " +
                             cudaGetErrorName(err) + ": " + cudaGetErrorString(err));
#endif
}

// The stream every kernel launch must use (MCSERVE_LAUNCH's last argument): the device runtime's
// one stream, so kernels are ordered with its copies, Zero and Gemm, and its Synchronize and
// device-to-host copies wait for them (the legacy default stream `0` would not be ordered with the
// runtime's non-blocking stream). Null under the emulator. Fails only when the device runtime
// could not be created, which no op reaches with tensors on the device. Any thread.
inline absl::StatusOr<cudaStream_t> KernelStream() {
  absl::StatusOr<DeviceRuntime*> runtime = RuntimeFor(MCSERVE_CUDA_EMULATED ? Device::kCudaEmu : Device::kCuda);
  if (!runtime.ok()) return runtime.status();
  return static_cast<cudaStream_t>((*runtime)->native_stream());
}

}  // namespace mcserve::kernels::MCSERVE_CUDA_NS
