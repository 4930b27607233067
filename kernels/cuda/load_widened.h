// Device-side loads of F32 / BF16 / F16 buffers (weights, biases) widened to float, for kernels that
// take a buffer of any of the three dtypes. Include from `_cuda.cu` files only (nvcc or the emulator).
#pragma once

#include <cstdint>

#include "kernels/core/dtype.h"
#include "kernels/cuda/cuda_compat.h"

namespace mcserve::kernels::MCSERVE_CUDA_NS {

// Element i of a F32 / BF16 / F16 buffer, widened to float.
__device__ __forceinline__ float LoadWidened(const void* p, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::kBF16:
      return Bf16ToF32(static_cast<const uint16_t*>(p)[i]);
    case DType::kF16:
      return F16ToF32(static_cast<const uint16_t*>(p)[i]);
    default:
      return static_cast<const float*>(p)[i];
  }
}

// LoadWidened, or 0 for a null (absent, optional) buffer.
__device__ __forceinline__ float LoadWidenedOrZero(const void* p, DType dtype, int64_t i) {
  return p == nullptr ? 0.0f : LoadWidened(p, dtype, i);
}

}  // namespace mcserve::kernels::MCSERVE_CUDA_NS
