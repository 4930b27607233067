// LatticeMemory's per-token math, shared by the CPU and CUDA backends (plain C++, nvcc-ready). One
// head's state M is row-major [m, d]: row i is slot s_i, φ_i = s_i/‖s_i‖. Per token (spec A.3):
//   h, c by variant:  DEC h = Σ_i k_i φ_i − v, c = k;  ENC h = v, c_i = φ_iᵀv − k_i;  SIM h = −v, c = k
//   Δs_i = −γ c_i (h − (φ_iᵀh) φ_i) / ‖s_i‖;  u_i = μ s_i + Δs_i;  s_i ← u_i / sqrt(max(‖u_i‖², eps))
//   (analytic: ‖u_i‖² taken as μ²‖s_i‖² + ‖Δs_i‖², Pythagoras);  o = Σ_i q_i s_i  (or Σ_i q_i φ_i).
// The pieces are per slot (rows) and per column so that a CUDA block can spread them over threads;
// every sum runs in index order, so the CPU and CUDA backends do the same arithmetic.
#pragma once

#include <math.h>
#include <cstdint>

#include "kernels/core/hd.h"
#include "kernels/lattice_memory/lattice_memory.h"

namespace mcserve::kernels {

// Guard of the renormalisation: s ← u / sqrt(max(‖u‖², kLatticeRenormEps)).
inline constexpr float kLatticeRenormEps = 1e-12f;

// ‖row‖ for row [d].
MCSERVE_HD float LatticeRowNorm(const float* row, int d) {
  float s = 0.0f;
  for (int j = 0; j < d; ++j) s += row[j] * row[j];
  return sqrtf(s);
}

// h_j, column j of the token's write signal. M [m, d], k [m], norm [m] (‖s_i‖), v [d].
MCSERVE_HD float LatticeSignal(const float* M, const float* k, const float* norm, const float* v, int j, int m,
                                      int d, LatticeMemoryVariant variant) {
  if (variant == LatticeMemoryVariant::kEnc) return v[j];
  if (variant == LatticeMemoryVariant::kSim) return -v[j];
  float s = 0.0f;
  for (int i = 0; i < m; ++i) s += k[i] * (M[static_cast<int64_t>(i) * d + j] / norm[i]);
  return s - v[j];
}

// c_i, slot i's write coefficient. row [d] = s_i, norm = ‖s_i‖, k_i the token's code, v [d].
MCSERVE_HD float LatticeCoefficient(const float* row, float norm, float k_i, const float* v, int d,
                                           LatticeMemoryVariant variant) {
  if (variant != LatticeMemoryVariant::kEnc) return k_i;
  float p = 0.0f;
  for (int j = 0; j < d; ++j) p += (row[j] / norm) * v[j];
  return p - k_i;
}

// Writes slot i in place: row [d] = s_i (norm ‖s_i‖), c its coefficient, h [d] the signal, h2 = ‖h‖².
MCSERVE_HD void LatticeSlotUpdate(float* row, float norm, float c, const float* h, float h2, float gamma,
                                         float mu, int d, bool analytic) {
  float p = 0.0f;
  for (int j = 0; j < d; ++j) p += (row[j] / norm) * h[j];
  const float coef = -gamma * c / norm;
  float n2 = 0.0f;
  for (int j = 0; j < d; ++j) {
    const float u = mu * row[j] + coef * (h[j] - p * (row[j] / norm));
    row[j] = u;
    n2 += u * u;
  }
  if (analytic) {
    const float rest = fmaxf(h2 - p * p, 0.0f);
    n2 = mu * mu * norm * norm + coef * coef * rest;
  }
  const float inv = 1.0f / sqrtf(fmaxf(n2, kLatticeRenormEps));
  for (int j = 0; j < d; ++j) row[j] *= inv;
}

// o_j = Σ_i q_i M_ij (norm null), or Σ_i q_i M_ij / norm_i.
MCSERVE_HD float LatticeRead(const float* M, const float* q, const float* norm, int j, int m, int d) {
  float s = 0.0f;
  for (int i = 0; i < m; ++i) {
    const float x = M[static_cast<int64_t>(i) * d + j];
    s += q[i] * (norm != nullptr ? x / norm[i] : x);
  }
  return s;
}

// ‖h‖² in index order.
MCSERVE_HD float LatticeSquaredNorm(const float* h, int d) {
  float s = 0.0f;
  for (int j = 0; j < d; ++j) s += h[j] * h[j];
  return s;
}

// Settings of one call, shared by every step.
struct LatticeStepOptions {
  LatticeMemoryVariant variant = LatticeMemoryVariant::kDec;
  bool analytic = false;
  bool normalized_readout = false;
};

// One token of one head, sequentially: M [m, d] in/out, q, k [m], v [d], o [d] out, scratch [2·m + d].
MCSERVE_HD void LatticeStep(float* M, const float* q, const float* k, const float* v, float gamma, float mu,
                                   int m, int d, LatticeStepOptions opt, float* o, float* scratch) {
  float* norm = scratch;
  float* c = scratch + m;
  float* h = scratch + 2 * m;
  for (int i = 0; i < m; ++i) norm[i] = LatticeRowNorm(M + static_cast<int64_t>(i) * d, d);
  for (int j = 0; j < d; ++j) h[j] = LatticeSignal(M, k, norm, v, j, m, d, opt.variant);
  const float h2 = LatticeSquaredNorm(h, d);
  for (int i = 0; i < m; ++i) {
    c[i] = LatticeCoefficient(M + static_cast<int64_t>(i) * d, norm[i], k[i], v, d, opt.variant);
  }
  for (int i = 0; i < m; ++i) {
    LatticeSlotUpdate(M + static_cast<int64_t>(i) * d, norm[i], c[i], h, h2, gamma, mu, d, opt.analytic);
  }
  if (opt.normalized_readout) {
    for (int i = 0; i < m; ++i) norm[i] = LatticeRowNorm(M + static_cast<int64_t>(i) * d, d);
  }
  for (int j = 0; j < d; ++j) o[j] = LatticeRead(M, q, opt.normalized_readout ? norm : nullptr, j, m, d);
}

}  // namespace mcserve::kernels
