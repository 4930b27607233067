// Entry point of the real CUDA runtime (kernels/cuda/cuda_runtime.cu), present only in builds with
// nvcc (MCSERVE_WITH_CUDA). Host-compiler-safe: no CUDA headers.
#pragma once

#include "absl/status/statusor.h"
#include "kernels/core/device_runtime.h"

namespace mcserve::kernels::internal {

// The process-wide CUDA runtime on device 0, created on first call (thread-safe); Unavailable
// ("no CUDA device: ...") when cudaGetDeviceCount fails or finds none, or the error that stopped
// its creation. The answer of the first call is kept for the life of the process.
absl::StatusOr<DeviceRuntime*> CudaDeviceRuntime();

}  // namespace mcserve::kernels::internal
