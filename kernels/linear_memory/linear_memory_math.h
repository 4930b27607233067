// LinearMemory per-token, per-head steps shared by the CPU and CUDA backends (plain C++, nvcc-ready).
// S is one head's memory, row-major [K, V] ("K-first"); every step reads after its write,
// o = S_tᵀ q. Inner loops run over contiguous V so they vectorise.
#pragma once

#include <cstdint>

#include "kernels/core/hd.h"

#if defined(__CUDACC__) || defined(__GNUC__)
#define MCSERVE_RESTRICT __restrict__
#else
#define MCSERVE_RESTRICT
#endif

namespace mcserve::kernels {

// Denominator guard of fla's normalised linear attention: o / (q·z + 1e-10).
inline constexpr float kLinearMemoryNormEps = 1e-10f;

// o [V] = Sᵀ q for S [K, V], q [K]. Memory Caching reads frozen memories with this same function.
MCSERVE_HD void ReadOut(const float* MCSERVE_RESTRICT S, const float* MCSERVE_RESTRICT q, int K, int V,
                        float* MCSERVE_RESTRICT o) {
  for (int j = 0; j < V; ++j) o[j] = 0.0f;
  for (int i = 0; i < K; ++i) {
    const float* row = S + static_cast<int64_t>(i) * V;
    const float qi = q[i];
    for (int j = 0; j < V; ++j) o[j] += qi * row[j];
  }
}

// Linear attention / GLA: S = Diag(α) S + k vᵀ (α = key_alpha [K], or 1 when null); o = Sᵀ q.
MCSERVE_HD void AdditiveStep(float* MCSERVE_RESTRICT S, const float* MCSERVE_RESTRICT q,
                             const float* MCSERVE_RESTRICT k, const float* MCSERVE_RESTRICT v,
                             const float* MCSERVE_RESTRICT key_alpha, int K, int V, float* MCSERVE_RESTRICT o) {
  for (int j = 0; j < V; ++j) o[j] = 0.0f;
  for (int i = 0; i < K; ++i) {
    float* row = S + static_cast<int64_t>(i) * V;
    const float a = key_alpha != nullptr ? key_alpha[i] : 1.0f;
    const float ki = k[i], qi = q[i];
    for (int j = 0; j < V; ++j) {
      row[j] = a * row[j] + ki * v[j];
      o[j] += qi * row[j];
    }
  }
}

// The normaliser of linear attention: z [K] += k, then o [V] /= (q·z + 1e-10).
MCSERVE_HD void NormalizeStep(float* MCSERVE_RESTRICT z, const float* MCSERVE_RESTRICT q,
                              const float* MCSERVE_RESTRICT k, int K, int V, float* MCSERVE_RESTRICT o) {
  float qz = 0.0f;
  for (int i = 0; i < K; ++i) {
    z[i] += k[i];
    qz += q[i] * z[i];
  }
  const float inv = 1.0f / (qz + kLinearMemoryNormEps);
  for (int j = 0; j < V; ++j) o[j] *= inv;
}

// (Gated) delta rule: S = α S; u = β (v − Sᵀk); S += k uᵀ; o = Sᵀ q. scratch: [V].
MCSERVE_HD void GatedDeltaStep(float* MCSERVE_RESTRICT S, const float* MCSERVE_RESTRICT q,
                               const float* MCSERVE_RESTRICT k, const float* MCSERVE_RESTRICT v, float alpha,
                               float beta, int K, int V, float* MCSERVE_RESTRICT o, float* MCSERVE_RESTRICT scratch) {
  float* u = scratch;
  for (int j = 0; j < V; ++j) u[j] = 0.0f;
  for (int i = 0; i < K; ++i) {  // decay, and the prediction Sᵀk of the decayed memory
    float* row = S + static_cast<int64_t>(i) * V;
    const float ki = k[i];
    for (int j = 0; j < V; ++j) {
      row[j] *= alpha;
      u[j] += ki * row[j];
    }
  }
  for (int j = 0; j < V; ++j) u[j] = beta * (v[j] - u[j]);
  for (int j = 0; j < V; ++j) o[j] = 0.0f;
  for (int i = 0; i < K; ++i) {  // write, then read
    float* row = S + static_cast<int64_t>(i) * V;
    const float ki = k[i], qi = q[i];
    for (int j = 0; j < V; ++j) {
      row[j] += ki * u[j];
      o[j] += qi * row[j];
    }
  }
}

// SWLA (window 2): S = α S + β k_prev v_prevᵀ + λ k vᵀ; o = Sᵀ q; then prev [K + V] = (k, v).
MCSERVE_HD void SwlaStep(float* MCSERVE_RESTRICT S, const float* MCSERVE_RESTRICT q,
                         const float* MCSERVE_RESTRICT k, const float* MCSERVE_RESTRICT v, float alpha, float beta,
                         float lambda, int K, int V, float* MCSERVE_RESTRICT prev, float* MCSERVE_RESTRICT o) {
  const float* k_prev = prev;
  const float* v_prev = prev + K;
  for (int j = 0; j < V; ++j) o[j] = 0.0f;
  for (int i = 0; i < K; ++i) {
    float* row = S + static_cast<int64_t>(i) * V;
    const float bk = beta * k_prev[i], lk = lambda * k[i], qi = q[i];
    for (int j = 0; j < V; ++j) {
      row[j] = alpha * row[j] + bk * v_prev[j] + lk * v[j];
      o[j] += qi * row[j];
    }
  }
  for (int i = 0; i < K; ++i) prev[i] = k[i];
  for (int j = 0; j < V; ++j) prev[K + j] = v[j];
}

// Titans, linear memory: G = k (Sᵀk − v)ᵀ with the old S; M = η M − θ G; S = α S + M; o = Sᵀ q.
// M: momentum [K, V]; scratch: [V].
MCSERVE_HD void TitansStep(float* MCSERVE_RESTRICT S, float* MCSERVE_RESTRICT M, const float* MCSERVE_RESTRICT q,
                           const float* MCSERVE_RESTRICT k, const float* MCSERVE_RESTRICT v, float alpha,
                           float theta, float eta, int K, int V, float* MCSERVE_RESTRICT o,
                           float* MCSERVE_RESTRICT scratch) {
  float* err = scratch;
  for (int j = 0; j < V; ++j) err[j] = 0.0f;
  for (int i = 0; i < K; ++i) {
    const float* row = S + static_cast<int64_t>(i) * V;
    const float ki = k[i];
    for (int j = 0; j < V; ++j) err[j] += ki * row[j];
  }
  for (int j = 0; j < V; ++j) err[j] -= v[j];
  for (int j = 0; j < V; ++j) o[j] = 0.0f;
  for (int i = 0; i < K; ++i) {
    float* row = S + static_cast<int64_t>(i) * V;
    float* mom = M + static_cast<int64_t>(i) * V;
    const float tk = theta * k[i], qi = q[i];
    for (int j = 0; j < V; ++j) {
      mom[j] = eta * mom[j] - tk * err[j];
      row[j] = alpha * row[j] + mom[j];
      o[j] += qi * row[j];
    }
  }
}

}  // namespace mcserve::kernels
