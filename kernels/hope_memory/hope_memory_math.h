// HopeMemory's math, shared by the CPU and CUDA backends (plain C++, nvcc-ready); the formulas are
// hope_memory.h's. One memory of one head is P floats: W2 row-major [E, d] (applied first), then W1
// row-major [o, E]. Every function computes one element (a hidden unit r < E, an output j < o, a
// channel c < d or a weight) so that a CUDA block can spread a phase over its threads while the CPU
// loops; each element is computed by one call with the same arithmetic on both backends, and every
// sum runs in a fixed order (Dot: 8 partial sums; column sums: index order). Pure functions of their
// arguments (those taking a HopeMlp write only the element they are given); any thread.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/core/hd.h"
#include "kernels/deep_memory/deep_memory_math.h"
#include "kernels/gate/gate_math.h"
#include "kernels/hope_memory/hope_memory.h"
#include "kernels/mc_readout/mc_readout_math.h"

namespace mcserve::kernels::hope_memory_math {

using mc_readout_math::Dot;  // ⟨a, b⟩, 8 partial sums in a fixed order

inline constexpr float kL2Eps = 1e-6f;    // L2(x) = x / √(Σx² + kL2Eps)
inline constexpr float kHatEps = 1e-12f;  // â = a / √(Σa² + kHatEps)

MCSERVE_HD float Sigmoid(float z) { return 1.0f / (1.0f + expf(-z)); }
MCSERVE_HD float Silu(float z) { return z * Sigmoid(z); }
// SiLU'(z) = s(1 + z(1 − s)), s = sigmoid(z).
MCSERVE_HD float SiluGrad(float z) {
  const float s = Sigmoid(z);
  return s * (1.0f + z * (1.0f - s));
}
// σ and σ' of the memory MLPs (GELU: exact erf).
MCSERVE_HD float Act(HopeActivation a, float z) {
  return a == HopeActivation::kGelu ? deep_memory_math::Gelu(z) : Silu(z);
}
MCSERVE_HD float ActGrad(HopeActivation a, float z) {
  return a == HopeActivation::kGelu ? deep_memory_math::GeluGrad(z) : SiluGrad(z);
}

// One memory of one head: its weights and where its update goes.
struct HopeMlp {
  const float* anchor;  // [P] the anchor A (producers, targets and gradients)
  float* run;           // [P] the running weights W (written)
  float* mom;           // [P] its momentum S, or null without momentum
  const float* skip;    // [d] the linear skip of a scalar memory, or null (R = 0)
  int o;                // output width: d or 1
};

// Floats of one memory: E·d + o·E.
MCSERVE_HD int64_t MlpFloats(int d, int e, int o) { return static_cast<int64_t>(e) * d + static_cast<int64_t>(o) * e; }

// R(x)_j: x_j when o = d (as the reference, also for d = 1), else ⟨skip, x⟩ or 0.
MCSERVE_HD float Residual(const float* x, const float* skip, int j, int o, int d) {
  if (o == d) return x[j];
  return skip != nullptr ? Dot(skip, x, d) : 0.0f;
}

// ⟨W2[r], x⟩ for W [P].
MCSERVE_HD float HiddenPre(const float* W, const float* x, int r, int d) {
  return Dot(W + static_cast<int64_t>(r) * d, x, d);
}

// M(x; W)_j = R(x)_j + ⟨W1[j], h⟩ given h = σ(W2 x) [e].
MCSERVE_HD float OutputAt(const float* W, const float* h, const float* x, const float* skip, int j, int o, int d,
                          int e) {
  const float* W1 = W + static_cast<int64_t>(e) * d;
  return Residual(x, skip, j, o, d) + Dot(W1 + static_cast<int64_t>(j) * e, h, e);
}

// Phase 1 of a write, hidden unit r: a = σ(z), sp = σ'(z) with z = ⟨A2[r], k⟩; hv = σ(⟨A2[r], v⟩)
// (v̂'s hidden); w2k = ⟨W2[r], k⟩ of the running weights (before the write).
MCSERVE_HD void WriteHidden(const HopeMlp& m, HopeActivation act, const float* k, const float* v, int r, int d,
                            float* a, float* sp, float* hv, float* w2k) {
  const float z = HiddenPre(m.anchor, k, r, d);
  a[r] = Act(act, z);
  sp[r] = ActGrad(act, z);
  hv[r] = Act(act, HiddenPre(m.anchor, v, r, d));
  w2k[r] = HiddenPre(m.run, k, r, d);
}

// Phase 2, output j: e_j = (R(k)_j + ⟨A1[j], a⟩) − v̂_j, v̂_j = R(v)_j + ⟨A1[j], hv⟩ (unscaled), and
// w1a_j = ⟨W1[j], a⟩ of the running weights (W1 â = w1a·rn).
MCSERVE_HD void WriteError(const HopeMlp& m, const float* k, const float* v, const float* a, const float* hv, int j,
                           int d, int e, float* err, float* w1a) {
  const float vhat = OutputAt(m.anchor, hv, v, m.skip, j, m.o, d, e);
  err[j] = OutputAt(m.anchor, a, k, m.skip, j, m.o, d, e) - vhat;
  w1a[j] = Dot(m.run + static_cast<int64_t>(e) * d + static_cast<int64_t>(j) * e, a, e);
}

// 1/√(Σa² + kHatEps) for a [e].
MCSERVE_HD float HatScale(const float* a, int e) { return 1.0f / sqrtf(Dot(a, a, e) + kHatEps); }

// Phase 3, hidden unit r: b_r = s·(A1ᵀ e)_r·σ'(z_r), the column sum in index order.
MCSERVE_HD float Backprop(const HopeMlp& m, const float* err, const float* sp, float s, int r, int d, int e) {
  const float* A1 = m.anchor + static_cast<int64_t>(e) * d;
  float acc = 0.0f;
  for (int j = 0; j < m.o; ++j) acc += A1[static_cast<int64_t>(j) * e + r] * err[j];
  return s * acc * sp[r];
}

// The token's gates and the rule settings every weight update needs.
struct HopeStep {
  float alpha, eta, beta, s;
  float rn;  // HatScale(a) of the memory being written (dgd_hidden)
  bool dgd_hidden;
};

// w ← decay − η g (S null), or S ← βS − η g, w ← decay + S.
MCSERVE_HD void ApplyUpdate(float* w, float* S, float decay, float g, const HopeStep& st) {
  if (S == nullptr) {
    *w = decay - st.eta * g;
    return;
  }
  const float m = st.beta * *S - st.eta * g;
  *S = m;
  *w = decay + m;
}

// Phase 4, weight i < E·d of W2: decay α w − η (W2 k)_r k_c, gradient g = b_r k_c.
MCSERVE_HD void UpdateW2(const HopeMlp& m, const HopeStep& st, const float* w2k, const float* b, const float* k,
                         int64_t i, int d) {
  const int64_t r = i / d, c = i % d;
  const float decay = st.alpha * m.run[i] - st.eta * (w2k[r] * k[c]);
  ApplyUpdate(m.run + i, m.mom != nullptr ? m.mom + i : nullptr, decay, b[r] * k[c], st);
}

// Phase 4, weight i < o·E of W1: decay α w (retention) or α w − η (W1 â)_j â_r, g = (s e_j) a_r.
MCSERVE_HD void UpdateW1(const HopeMlp& m, const HopeStep& st, const float* err, const float* a, const float* w1a,
                         int64_t i, int d, int e) {
  const int64_t off = static_cast<int64_t>(e) * d + i, j = i / e, r = i % e;
  float decay = st.alpha * m.run[off];
  if (st.dgd_hidden) decay -= st.eta * ((w1a[j] * st.rn) * (a[r] * st.rn));
  ApplyUpdate(m.run + off, m.mom != nullptr ? m.mom + off : nullptr, decay, (st.s * err[j]) * a[r], st);
}

// SiLU of the causal depthwise conv of one channel: w [K] its taps, win [K−1] its previous inputs
// (oldest first, `stride` floats apart), z this token's input; shifts z into the window.
MCSERVE_HD float ConvStep(const float* w, float* win, int64_t stride, int k, float z) {
  float y = 0.0f;
  for (int i = 0; i + 1 < k; ++i) y += w[i] * win[i * stride];
  y += w[k - 1] * z;
  for (int i = 0; i + 2 < k; ++i) win[i * stride] = win[(i + 1) * stride];
  if (k > 1) win[(k - 2) * stride] = z;
  return Silu(y);
}

// √(Σx² + kL2Eps) for x [d]: L2(x) = x / L2Norm(x).
MCSERVE_HD float L2Norm(const float* x, int d) { return sqrtf(Dot(x, x, d) + kL2Eps); }

// α = sigmoid(α~); η = scale·sigmoid(η~) or scale·softplus(η~); η ← min(η, 1 + α) with eta_clamp.
// Returns {α, η}.
struct HopeGates {
  float alpha, eta;
};
MCSERVE_HD HopeGates Gates(const HopeMemoryOptions& o, float eta_pre, float alpha_pre) {
  const float alpha = Sigmoid(alpha_pre);
  float eta = o.eta_scale * (o.eta_activation == HopeEtaActivation::kSoftplus ? gate_math::Softplus(eta_pre)
                                                                              : Sigmoid(eta_pre));
  if (o.eta_clamp) eta = fminf(eta, 1.0f + alpha);
  return {alpha, eta};
}

}  // namespace mcserve::kernels::hope_memory_math
