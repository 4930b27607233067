// Block-wide reductions for CUDA kernels (nvcc and the emulator). Include after cuda_compat.h.
#pragma once

#include "kernels/cuda/cuda_compat.h"

namespace mcserve::kernels::MCSERVE_CUDA_NS {

// Sum of `v` over the block (blockDim.x a multiple of 32, at most 1024), added in a fixed order;
// every thread gets the same total. warp_sums: [32] shared. Contains one __syncthreads: call it
// once per kernel.
__device__ __forceinline__ float BlockSum(float v, float* warp_sums) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  float total = 0.0f;
  const int warps = blockDim.x / 32;
  for (int i = 0; i < warps; ++i) total += warp_sums[i];
  return total;
}

// Maximum of `v` over the block (same shape rules as BlockSum); every thread gets it. warp_maxes:
// [32] shared, not shared with another reduction of the same kernel. Contains one __syncthreads.
__device__ __forceinline__ float BlockMax(float v, float* warp_maxes) {
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) warp_maxes[warp] = v;
  __syncthreads();
  float m = warp_maxes[0];
  const int warps = blockDim.x / 32;
  for (int i = 1; i < warps; ++i) m = fmaxf(m, warp_maxes[i]);
  return m;
}

}  // namespace mcserve::kernels::MCSERVE_CUDA_NS
