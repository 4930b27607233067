// Warp-level GEMV pieces of the deep-memory CUDA kernels (nvcc and the emulator). Include after
// kernels/cuda/cuda_compat.h. Weight rows stay in global memory; a warp streams one row with its 32
// lanes on consecutive elements (coalesced), so block-wide passes over a [rows, n] matrix assign
// row r to warp r mod (blockDim.x / 32). blockDim.x must be a multiple of 32.
#pragma once

#include "kernels/cuda/cuda_compat.h"

namespace mcserve::kernels::MCSERVE_CUDA_NS::deep_memory {

// Sum of v over the warp by an xor butterfly (fixed order); every lane gets the total. All 32 lanes
// must call it.
__device__ __forceinline__ float WarpSum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// ⟨row [n], x [n]⟩ by the calling warp: lane l sums elements l, l + 32, ..., then WarpSum.
__device__ __forceinline__ float WarpDot(const float* row, const float* x, int n) {
  float acc = 0.0f;
  for (int c = static_cast<int>(threadIdx.x % 32); c < n; c += 32) acc += row[c] * x[c];
  return WarpSum(acc);
}

}  // namespace mcserve::kernels::MCSERVE_CUDA_NS::deep_memory
