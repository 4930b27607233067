// Deep (MLP) memory math shared by the CPU and CUDA backends (plain C++, nvcc-ready), spec B.2.3–B.2.5.
// One head's weights θ are P = 2·e·d floats: W2 row-major [e, d] (applied first), then W1 row-major
// [d, e]. The memory is M(x) = x + N(W1·GELU(W2·x)) with exact (erf) GELU and N the identity or a
// layer norm over the d outputs with slow affine gain/bias (g, b) [d], biased variance.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/core/hd.h"
#include "kernels/mc_readout/mc_readout_math.h"

namespace mcserve::kernels::deep_memory_math {

using mc_readout_math::Dot;  // ⟨a, b⟩, 8 partial sums in a fixed order

inline constexpr float kInvSqrt2 = 0.70710678118654752f;    // 1/√2
inline constexpr float kInvSqrt2Pi = 0.39894228040143268f;  // 1/√(2π)

// Exact GELU: z·Φ(z).
MCSERVE_HD float Gelu(float z) { return 0.5f * z * (1.0f + erff(z * kInvSqrt2)); }

// GELU'(z) = Φ(z) + z·φ(z).
MCSERVE_HD float GeluGrad(float z) {
  return 0.5f * (1.0f + erff(z * kInvSqrt2)) + z * kInvSqrt2Pi * expf(-0.5f * z * z);
}

// SiLU: z·sigmoid(z), sigmoid(z) = 1/(1 + e^−z) (HOPE's memory activation, as kernels/hope_memory's).
MCSERVE_HD float Silu(float z) { return z * (1.0f / (1.0f + expf(-z))); }

// The read-out activation σ: SiLU when `silu`, else exact GELU.
MCSERVE_HD float Activate(bool silu, float z) { return silu ? Silu(z) : Gelu(z); }

// Mean and 1/sqrt(var + eps) of y [d] (biased variance, two passes).
struct NormStats {
  float mean, rstd;
};
MCSERVE_HD NormStats LayerNormStats(const float* y, int d, float eps) {
  float sum = 0.0f;
  for (int j = 0; j < d; ++j) sum += y[j];
  const float mean = sum / static_cast<float>(d);
  float ss = 0.0f;
  for (int j = 0; j < d; ++j) {
    const float c = y[j] - mean;
    ss += c * c;
  }
  return {mean, 1.0f / sqrtf(ss / static_cast<float>(d) + eps)};
}

// dy [d] = N'(y)ᵀ dout [d] for the layer norm with gain g [d] (dy may alias dout):
// x̂ = (y − μ)·rstd, dx̂ = g ⊙ dout, dy = rstd·(dx̂ − mean(dx̂) − x̂·mean(dx̂ ⊙ x̂)).
MCSERVE_HD void LayerNormBackward(const float* y, NormStats s, const float* g, const float* dout, int d, float* dy) {
  float m1 = 0.0f, m2 = 0.0f;
  for (int j = 0; j < d; ++j) {
    const float dxh = g[j] * dout[j];
    m1 += dxh;
    m2 += dxh * ((y[j] - s.mean) * s.rstd);
  }
  m1 /= static_cast<float>(d);
  m2 /= static_cast<float>(d);
  for (int j = 0; j < d; ++j) {
    const float xh = (y[j] - s.mean) * s.rstd;
    dy[j] = s.rstd * (g[j] * dout[j] - m1 - xh * m2);
  }
}

// out [d] = x + N(y) for x, y [d]; N is the identity when g is null, else the layer norm with gain
// g [d] and bias b [d]. out may alias x or y.
MCSERVE_HD void FinishOutput(const float* x, const float* y, const float* g, const float* b, float eps, int d,
                             float* out) {
  if (g == nullptr) {
    for (int j = 0; j < d; ++j) out[j] = x[j] + y[j];
    return;
  }
  const NormStats s = LayerNormStats(y, d, eps);
  for (int j = 0; j < d; ++j) out[j] = x[j] + (g[j] * ((y[j] - s.mean) * s.rstd) + b[j]);
}

// acc [d] += w·(x + N(y)) for x, y [d] (N as in FinishOutput); scratch [d] (may alias y).
MCSERVE_HD void AccumulateOutput(const float* x, const float* y, const float* g, const float* b, float eps, int d,
                                 float w, float* scratch, float* acc) {
  FinishOutput(x, y, g, b, eps, d, scratch);
  for (int j = 0; j < d; ++j) acc[j] += w * scratch[j];
}

// The gradient of the inner objective w.r.t. the pre-norm output y [d] of the memory at key k [d]:
// DLA (⟨M(k), v⟩): dy = N'(y)ᵀ v; Titans (½‖M(k) − v‖², the 2 absorbed into η): dy = N'(y)ᵀ (M(k) − v)
// with M(k) = k + N(y). g, b [d] null for N = identity. dy [d] must not alias y, k or v.
MCSERVE_HD void OutputGrad(bool titans, const float* y, const float* k, const float* v, const float* g,
                           const float* b, float eps, int d, float* dy) {
  if (g == nullptr) {
    for (int j = 0; j < d; ++j) dy[j] = titans ? (k[j] + y[j]) - v[j] : v[j];
    return;
  }
  const NormStats s = LayerNormStats(y, d, eps);
  if (titans) {
    for (int j = 0; j < d; ++j) dy[j] = (k[j] + (g[j] * ((y[j] - s.mean) * s.rstd) + b[j])) - v[j];
    LayerNormBackward(y, s, g, dy, d, dy);
  } else {
    LayerNormBackward(y, s, g, v, d, dy);
  }
}

// One weight of the DLA update θ ← θ + η·G, for its gradient element gr·x (G_W2 = dz kᵀ, G_W1 = dy hᵀ).
MCSERVE_HD float DlaUpdate(float w, float eta, float gr, float x) { return w + eta * (gr * x); }

// One weight of the Titans update S ← β·S − η·G; θ ← α·θ + S, for its gradient element gr·x.
MCSERVE_HD float TitansUpdate(float w, float* s, float alpha, float beta, float eta, float gr, float x) {
  const float m = beta * *s - eta * (gr * x);
  *s = m;
  return alpha * w + m;
}

// One row w [n] of a weight matrix: w += η·gr·x (DLA), then returns ⟨w, q⟩ with the updated row
// (8 partial sums, like Dot).
MCSERVE_HD float DlaRowUpdateDot(float* w, float eta, float gr, const float* x, const float* q, int n) {
  float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) {
      w[i + l] = DlaUpdate(w[i + l], eta, gr, x[i + l]);
      acc[l] += w[i + l] * q[i + l];
    }
  }
  float sum = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
  for (; i < n; ++i) {
    w[i] = DlaUpdate(w[i], eta, gr, x[i]);
    sum += w[i] * q[i];
  }
  return sum;
}

// The same for Titans: s [n] is the row's momentum.
MCSERVE_HD float TitansRowUpdateDot(float* w, float* s, float alpha, float beta, float eta, float gr,
                                    const float* x, const float* q, int n) {
  float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) {
      w[i + l] = TitansUpdate(w[i + l], s + i + l, alpha, beta, eta, gr, x[i + l]);
      acc[l] += w[i + l] * q[i + l];
    }
  }
  float sum = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
  for (; i < n; ++i) {
    w[i] = TitansUpdate(w[i], s + i, alpha, beta, eta, gr, x[i]);
    sum += w[i] * q[i];
  }
  return sum;
}

// y [d] = c·W1·GELU(c·W2·x) for one head's weights W [P] and x [d] (the pre-norm MLP output, c the
// weight scale); h [e] receives σ(c·W2·x), σ = GELU (SiLU with `silu`).
MCSERVE_HD void MlpForward(const float* W, const float* x, float c, int d, int e, float* h, float* y,
                           bool silu = false) {
  const float* W2 = W;
  const float* W1 = W + static_cast<int64_t>(e) * d;
  for (int r = 0; r < e; ++r) h[r] = Activate(silu, c * Dot(W2 + static_cast<int64_t>(r) * d, x, d));
  for (int j = 0; j < d; ++j) y[j] = c * Dot(W1 + static_cast<int64_t>(j) * e, h, e);
}

}  // namespace mcserve::kernels::deep_memory_math
