// Per-row math of LayerNorm shared by the CPU and CUDA backends (fp32 throughout). The CUDA kernel
// reduces the two sums across a block and calls the same finishing functions.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/core/hd.h"

namespace mcserve::kernels::layer_norm_math {

// mean(x) from the row's sum over n elements.
MCSERVE_HD float MeanFromSum(float sum, int64_t n) { return sum / static_cast<float>(n); }

// rsqrt(var + eps) from the row's sum of squared deviations ssd over n elements.
MCSERVE_HD float InvStdFromSumSq(float ssd, int64_t n, float eps) {
  return 1.0f / sqrtf(ssd / static_cast<float>(n) + eps);
}

// One normalised element: (x − mean) · inv · w + b.
MCSERVE_HD float NormalizeElement(float x, float mean, float inv, float w, float b) { return (x - mean) * inv * w + b; }

// Σ f(x_i) over one row with eight partial sums (vectorisable); f(x) = x − shift, squared when `square`.
MCSERVE_HD float RowSum(const float* x, int64_t n, float shift, bool square) {
  float part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) {
      const float d = x[i + j] - shift;
      part[j] += square ? d * d : d;
    }
  }
  for (; i < n; ++i) {
    const float d = x[i] - shift;
    part[0] += square ? d * d : d;
  }
  return ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
}

// out = LayerNorm(x) · w + b for one row; x, w, b, out: [n]; out may alias x.
MCSERVE_HD void NormalizeRow(const float* x, const float* w, const float* b, int64_t n, float eps, float* out) {
  const float mean = MeanFromSum(RowSum(x, n, 0.0f, false), n);
  const float inv = InvStdFromSumSq(RowSum(x, n, mean, true), n, eps);
  for (int64_t i = 0; i < n; ++i) out[i] = NormalizeElement(x[i], mean, inv, w[i], b[i]);
}

}  // namespace mcserve::kernels::layer_norm_math
