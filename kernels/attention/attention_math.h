// Attention's per-(row, head) math, shared by the CPU and CUDA backends (plain C++, nvcc-ready).
// One query q [dh] attends over len cache positions; position s's key and value rows are
// K + s·stride and V + s·stride (stride = Hkv·dh floats in the [capacity, Hkv, dh] slot cache).
//   z_s = scale·⟨q, K_s⟩,  m = max_s z_s,  w_s = exp(z_s − m),  o_d = (Σ_s w_s V_s,d) / (Σ_s w_s).
// Every sum has a fixed order (the dot product 8 partial sums, the others position order) and every
// value is a function of its inputs only, so the CPU and CUDA backends do the same arithmetic.
#pragma once

#include <math.h>
#include <cstdint>

#include "kernels/core/hd.h"

namespace mcserve::kernels::attention_math {

// ⟨a, b⟩ over n floats; 8 partial sums combined in a fixed order (vectorisable, deterministic).
MCSERVE_HD float Dot(const float* a, const float* b, int n) {
  float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) acc[l] += a[i + l] * b[i + l];
  }
  float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

// z_s: the scaled logit of query q [dh] against one key row k_row [dh].
MCSERVE_HD float Logit(const float* q, const float* k_row, int dh, float scale) { return scale * Dot(q, k_row, dh); }

// w_s = exp(z_s − m) for the row's maximum logit m (so every exponent is ≤ 0).
MCSERVE_HD float Weight(float z, float m) { return expf(z - m); }

// Σ_s w_s over w [len], in position order.
MCSERVE_HD float WeightSum(const float* w, int64_t len) {
  float s = 0.0f;
  for (int64_t i = 0; i < len; ++i) s += w[i];
  return s;
}

// Σ_s w_s V_s,d for one column d, in position order; V [len, stride] (column d of each row).
MCSERVE_HD float WeightedColumn(const float* w, const float* V, int64_t stride, int64_t len, int d) {
  float acc = 0.0f;
  for (int64_t s = 0; s < len; ++s) acc += w[s] * V[s * stride + d];
  return acc;
}

// One row of an attention output: o = (Σ_s w_s V_s) / sum. q [dh], K and V [len, stride], w [len]
// scratch, o [dh]. The same arithmetic as the CUDA kernel's pieces; len ≥ 1.
MCSERVE_HD void AttendRow(const float* q, const float* K, const float* V, int64_t stride, int64_t len, int dh,
                          float scale, float* w, float* o) {
  float m = -INFINITY;
  for (int64_t s = 0; s < len; ++s) {
    w[s] = Logit(q, K + s * stride, dh, scale);
    m = fmaxf(m, w[s]);
  }
  for (int64_t s = 0; s < len; ++s) w[s] = Weight(w[s], m);
  const float sum = WeightSum(w, len);
  for (int d = 0; d < dh; ++d) o[d] = 0.0f;
  for (int64_t s = 0; s < len; ++s) {  // per column the same order as WeightedColumn, rows contiguous
    const float* v_row = V + s * stride;
    for (int d = 0; d < dh; ++d) o[d] += w[s] * v_row[d];
  }
  for (int d = 0; d < dh; ++d) o[d] /= sum;
}

}  // namespace mcserve::kernels::attention_math
