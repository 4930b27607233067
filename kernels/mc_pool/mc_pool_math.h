// Per-row math of McSegmentPool, shared by the CPU and CUDA backends.
#pragma once

#include <cstdint>

#include "kernels/core/hd.h"

namespace mcserve::kernels::mc_pool_math {

// Adds key k [K] to the running sum [K] (zeroed first when the row starts a segment) and writes
// the pool (sum / j for the mean, else the sum) to out [K].
MCSERVE_HD void PoolRow(float* sum, const float* k, int64_t dim, int64_t j, bool starts_segment, bool mean,
                        float* out) {
  const float inv = mean ? 1.0f / static_cast<float>(j) : 1.0f;
  for (int64_t d = 0; d < dim; ++d) {
    const float s = (starts_segment ? 0.0f : sum[d]) + k[d];
    sum[d] = s;
    out[d] = s * inv;
  }
}

// Logarithmic segmentation, token n (1-based): restarts the per-level sums [levels, K] (level l at
// sums + l·level_stride) whose block starts at n, adds key k [K] to every level, and writes the pool
// of the level-ctz(n) block to out [K]. The CUDA kernel calls it per element (dim 1, stride K).
MCSERVE_HD void LevelPoolRowStrided(float* sums, int64_t level_stride, const float* k, int64_t dim, int levels,
                                    int64_t n, bool mean, float* out) {
  int p = 0;
  while (((n >> p) & 1) == 0) ++p;
  for (int l = 0; l < levels; ++l) {
    float* s = sums + l * level_stride;
    const bool starts = ((n - 1) & ((int64_t{1} << l) - 1)) == 0;
    for (int64_t d = 0; d < dim; ++d) s[d] = (starts ? 0.0f : s[d]) + k[d];
  }
  const float inv = mean ? 1.0f / static_cast<float>(int64_t{1} << p) : 1.0f;
  for (int64_t d = 0; d < dim; ++d) out[d] = sums[p * level_stride + d] * inv;
}

// The same with the levels packed contiguously: sums [levels, K].
MCSERVE_HD void LevelPoolRow(float* sums, const float* k, int64_t dim, int levels, int64_t n, bool mean,
                             float* out) {
  LevelPoolRowStrided(sums, dim, k, dim, levels, n, mean, out);
}

}  // namespace mcserve::kernels::mc_pool_math
