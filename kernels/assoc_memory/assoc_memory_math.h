// AssocMemory math shared by the CPU and CUDA backends (plain C++, nvcc-compatible). Every value is
// one thread's sum in index order, so both backends compute the same arithmetic.
#pragma once

#include <cstdint>

#include "kernels/core/hd.h"

namespace mcserve::kernels::assoc_math {

// Σ_f x[f] · y[f] over f < n, in order.
MCSERVE_HD float Dot(const float* x, const float* y, int64_t n) {
  float acc = 0.0f;
  for (int64_t f = 0; f < n; ++f) acc += x[f] * y[f];
  return acc;
}

// Column c of f · A for f [F] and A [F, D] (row-major): Σ_f f[f] · A[f, c], in order.
MCSERVE_HD float MatColumn(const float* f, const float* a, int64_t nf, int64_t d, int64_t c) {
  float acc = 0.0f;
  for (int64_t i = 0; i < nf; ++i) acc += f[i] * a[i * d + c];
  return acc;
}

// The read/recall denominator f · z + eps (eps added after the dot product).
MCSERVE_HD float Denominator(const float* f, const float* z, int64_t nf, float eps) {
  return Dot(f, z, nf) + eps;
}

// γ of a key with denominator d: clip(1 − d / (|fk|² + eps), 0, 1).
MCSERVE_HD float Gamma(const float* fk, int64_t nf, float d, float eps) {
  const float g = 1.0f - d / (Dot(fk, fk, nf) + eps);
  return g < 0.0f ? 0.0f : (g > 1.0f ? 1.0f : g);
}

// The write's update of one A entry: Σ_i fk[i, f] · delta[i, c] over the n rows, in row order.
MCSERVE_HD float UpdateEntry(const float* fk, const float* delta, int64_t n, int64_t nf, int64_t d, int64_t f,
                             int64_t c) {
  float acc = 0.0f;
  for (int64_t i = 0; i < n; ++i) acc += fk[i * nf + f] * delta[i * d + c];
  return acc;
}

// The write's update of one z entry: Σ_i γ_i · fk[i, f], in row order.
MCSERVE_HD float UpdateZ(const float* fk, const float* gamma, int64_t n, int64_t nf, int64_t f) {
  float acc = 0.0f;
  for (int64_t i = 0; i < n; ++i) acc += gamma[i] * fk[i * nf + f];
  return acc;
}

}  // namespace mcserve::kernels::assoc_math
