// Per-row math of L2Norm (L2 and sum normalisation), shared by the CPU and CUDA backends.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/core/hd.h"
#include "kernels/l2_norm/l2_norm.h"

namespace mcserve::kernels::l2_norm_math {

// Σ x[i]² (square = true) or Σ x[i] of one row; x: [n]. Eight partial sums keep it vectorisable.
template <bool kSquare>
MCSERVE_HD float RowSum(const float* x, int64_t n) {
  float part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) part[j] += kSquare ? x[i + j] * x[i + j] : x[i + j];
  }
  for (; i < n; ++i) part[0] += kSquare ? x[i] * x[i] : x[i];
  return ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
}

// The row factor from the row's sum: scale / sqrt(sum + eps) (kL2, sum = Σx²) or
// scale / (sum + eps) (kSum, sum = Σx). The CUDA kernel reduces the sum across a block, then calls this.
MCSERVE_HD float FactorFromSum(RowNormKind kind, float sum, float eps, float scale) {
  if (kind == RowNormKind::kL2) return scale / sqrtf(sum + eps);
  return scale / (sum + eps);
}

// The factor a row is multiplied by: scale / sqrt(Σx² + eps) (kL2) or scale / (Σx + eps) (kSum).
MCSERVE_HD float RowFactor(RowNormKind kind, const float* x, int64_t n, float eps, float scale) {
  const float sum = kind == RowNormKind::kL2 ? RowSum<true>(x, n) : RowSum<false>(x, n);
  return FactorFromSum(kind, sum, eps, scale);
}

// out[i] = x[i] · factor; x, out: [n] (may alias).
MCSERVE_HD void ScaleRow(const float* x, int64_t n, float factor, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * factor;
}

}  // namespace mcserve::kernels::l2_norm_math
