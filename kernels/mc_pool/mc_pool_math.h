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

}  // namespace mcserve::kernels::mc_pool_math
