// Per-row math of RmsNorm shared by the CPU and CUDA backends (fp32 throughout).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/core/hd.h"

namespace mcserve::kernels::rms_norm_math {

// 1 / (1 + e^-x), saturating cleanly to 0 and 1.
MCSERVE_HD float Sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// g · sigmoid(g): the swish gate of FusedRMSNormGated.
MCSERVE_HD float Swish(float g) { return g * Sigmoid(g); }

// rsqrt(mean(x²) + eps) from the row's sum of squares ss over n elements (the CUDA kernel reduces
// ss across a block, then calls this).
MCSERVE_HD float InvRmsFromSumSq(float ss, int64_t n, float eps) { return 1.0f / sqrtf(ss / static_cast<float>(n) + eps); }

// rsqrt(mean(x²) + eps) of one row; x: [n]. Eight partial sums keep the loop vectorisable.
MCSERVE_HD float InvRms(const float* x, int64_t n, float eps) {
  float part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) part[j] += x[i + j] * x[i + j];
  }
  for (; i < n; ++i) part[0] += x[i] * x[i];
  float ss = ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
  return InvRmsFromSumSq(ss, n, eps);
}

// One normalised element: x · inv · w, times swish(g) in the gated form.
MCSERVE_HD float NormalizeElement(float x, float inv, float w) { return x * inv * w; }
MCSERVE_HD float NormalizeElementGated(float x, float inv, float w, float g) { return x * inv * w * Swish(g); }

// out = x · inv · w (· swish(g) when g is non-null); x, w, g, out: [n]; out may alias x or g.
MCSERVE_HD void NormalizeRow(const float* x, const float* w, const float* g, int64_t n, float inv, float* out) {
  if (g == nullptr) {
    for (int64_t i = 0; i < n; ++i) out[i] = NormalizeElement(x[i], inv, w[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = NormalizeElementGated(x[i], inv, w[i], g[i]);
  }
}

}  // namespace mcserve::kernels::rms_norm_math
