// Scalar math of Linear shared by the CPU and CUDA backends: weight element widening and the
// reference dot product of one input row with one weight row (fp32 accumulation).
#pragma once

#include <cstdint>

#include "kernels/core/dtype.h"

namespace mcserve::kernels::linear_math {

// Widens one stored weight element to float.
MCSERVE_HD float WeightToF32(float w) { return w; }
MCSERVE_HD float Bf16WeightToF32(uint16_t w) { return Bf16ToF32(w); }
MCSERVE_HD float F16WeightToF32(uint16_t w) { return F16ToF32(w); }

// Σ_k x[k]·w[k] for an F32 weight row; x: [n], w: [n].
MCSERVE_HD float DotF32(const float* x, const float* w, int64_t n) {
  float acc = 0.0f;
  for (int64_t k = 0; k < n; ++k) acc += x[k] * w[k];
  return acc;
}

// Σ_k x[k]·bf16(w[k]); x: [n], w: [n] BF16 bits.
MCSERVE_HD float DotBf16(const float* x, const uint16_t* w, int64_t n) {
  float acc = 0.0f;
  for (int64_t k = 0; k < n; ++k) acc += x[k] * Bf16ToF32(w[k]);
  return acc;
}

// Σ_k x[k]·f16(w[k]); x: [n], w: [n] F16 bits.
MCSERVE_HD float DotF16(const float* x, const uint16_t* w, int64_t n) {
  float acc = 0.0f;
  for (int64_t k = 0; k < n; ++k) acc += x[k] * F16ToF32(w[k]);
  return acc;
}

}  // namespace mcserve::kernels::linear_math
