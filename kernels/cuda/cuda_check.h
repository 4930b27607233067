// Turning CUDA runtime and cuBLAS errors into absl::Status naming the failed call, file and line.
// nvcc-only (includes CUDA headers); use inside functions returning absl::Status or StatusOr.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace mcserve::kernels::internal {

// The Status for `error` returned by `call` at file:line. Clears CUDA's last-error slot so a later
// cudaGetLastError() does not report the same (non-sticky) error again.
inline absl::Status CudaErrorStatus(cudaError_t error, const char* call, const char* file, int line) {
  (void)cudaGetLastError();
  std::string message = absl::StrCat(call, " failed: ", cudaGetErrorName(error), " (",
                                      cudaGetErrorString(error), ") at ", file, ":", line);
  switch (error) {
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(message);
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
      return absl::UnavailableError(message);
    case cudaErrorInvalidValue:
      return absl::InvalidArgumentError(message);
    default:
      return absl::InternalError(message);
  }
}

// The Status for cuBLAS `status` returned by `call` at file:line.
inline absl::Status CublasErrorStatus(cublasStatus_t status, const char* call, const char* file, int line) {
  std::string message =
      absl::StrCat(call, " failed: ", cublasGetStatusString(status), " (", static_cast<int>(status), ") at ", file,
                   ":", line);
  switch (status) {
    case CUBLAS_STATUS_ALLOC_FAILED:
      return absl::ResourceExhaustedError(message);
    case CUBLAS_STATUS_INVALID_VALUE:
      return absl::InvalidArgumentError(message);
    case CUBLAS_STATUS_NOT_SUPPORTED:
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return absl::UnimplementedError(message);
    default:
      return absl::InternalError(message);
  }
}

}  // namespace mcserve::kernels::internal

// Returns a Status naming `call` from the enclosing function when the CUDA call fails.
#define MCSERVE_CUDA_RETURN_IF_ERROR(call)                                                          \
  do {                                                                                             \
    const cudaError_t mcserve_cuda_error_ = (call);                                                \
    if (mcserve_cuda_error_ != cudaSuccess) {                                                      \
      return ::mcserve::kernels::internal::CudaErrorStatus(mcserve_cuda_error_, #call, __FILE__, __LINE__); \
    }                                                                                              \
  } while (0)

// Returns a Status naming `call` from the enclosing function when the cuBLAS call fails.
#define MCSERVE_CUBLAS_RETURN_IF_ERROR(call)                                                          \
  do {                                                                                               \
    const cublasStatus_t mcserve_cublas_status_ = (call);                                            \
    if (mcserve_cublas_status_ != CUBLAS_STATUS_SUCCESS) {                                           \
      return ::mcserve::kernels::internal::CublasErrorStatus(mcserve_cublas_status_, #call, __FILE__, __LINE__); \
    }                                                                                                \
  } while (0)
