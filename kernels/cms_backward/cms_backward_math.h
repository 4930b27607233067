// Per-row / per-element math of the CMS backward ops (cms_backward.h), shared by the CPU and CUDA
// backends: each row or element is computed by one call with the same arithmetic on both, and every
// sum runs in index order, so the backends agree bit for bit. Pure functions; any thread.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/core/hd.h"
#include "kernels/deep_memory/deep_memory_math.h"

namespace mcserve::kernels::cms_backward_math {

MCSERVE_HD float Sigmoid(float z) { return 1.0f / (1.0f + expf(-z)); }

// dx of y = x·inv·w, inv = rsqrt(mean(x²) + eps): dx_i = inv·w_i·dy_i − inv³/n · x_i · Σ_j w_j dy_j x_j.
// x, w, dy, dx: [n]; dx may alias dy.
MCSERVE_HD void RmsNormBackwardRow(const float* x, const float* w, const float* dy, int64_t n, float eps, float* dx) {
  float ss = 0.0f, dot = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    ss += x[i] * x[i];
    dot += w[i] * dy[i] * x[i];
  }
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(n) + eps);
  const float k = inv * inv * inv * dot / static_cast<float>(n);
  for (int64_t i = 0; i < n; ++i) dx[i] = inv * w[i] * dy[i] - k * x[i];
}

// grad = softmax(logits) − onehot(target); logits, grad: [v] (may alias).
MCSERVE_HD void XentGradRow(const float* logits, int32_t target, int64_t v, float* grad) {
  float mx = logits[0];
  for (int64_t i = 1; i < v; ++i) mx = fmaxf(mx, logits[i]);
  float sum = 0.0f;
  for (int64_t i = 0; i < v; ++i) sum += expf(logits[i] - mx);
  const float inv = 1.0f / sum;
  for (int64_t i = 0; i < v; ++i) grad[i] = expf(logits[i] - mx) * inv - (i == target ? 1.0f : 0.0f);
}

// SwiGLU element: m = SiLU(g)·u → (∂g, ∂u) = (dm·u·SiLU'(g), dm·SiLU(g)).
MCSERVE_HD void SwiGluBackward(float g, float u, float dm, float* dg, float* du) {
  const float s = Sigmoid(g);
  *dg = dm * u * (s * (1.0f + g * (1.0f - s)));
  *du = dm * (g * s);
}

// GELU element (exact erf): ∂u = dm·GELU'(u).
MCSERVE_HD float GeluBackward(float u, float dm) { return dm * deep_memory_math::GeluGrad(u); }

}  // namespace mcserve::kernels::cms_backward_math
