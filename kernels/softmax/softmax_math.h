// Per-row math of Softmax shared by the CPU and CUDA backends (fp32). The CUDA kernel reduces the
// row's max and sum across a block and calls the same element functions.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/core/hd.h"

namespace mcserve::kernels::softmax_math {

// exp(x − max): the unnormalised weight of one element.
MCSERVE_HD float Weight(float x, float max) { return expf(x - max); }

// One output element: the weight over the row's total.
MCSERVE_HD float Normalize(float weight, float total) { return weight / total; }

// Softmax of one row; x, out: [n] (out may alias x).
MCSERVE_HD void SoftmaxRow(const float* x, int64_t n, float* out) {
  float max = x[0];
  for (int64_t i = 1; i < n; ++i) max = fmaxf(max, x[i]);
  float part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t i = 0; i < n; ++i) {
    out[i] = Weight(x[i], max);
    part[i % 8] += out[i];
  }
  const float total = ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
  for (int64_t i = 0; i < n; ++i) out[i] = Normalize(out[i], total);
}

}  // namespace mcserve::kernels::softmax_math
