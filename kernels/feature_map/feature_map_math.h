// FeatureMap per-row math shared by the CPU and CUDA backends (plain C++, nvcc-compatible).
// Definitions follow fla/modules/feature_map.py and fla/layers/linear_attn.py.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/core/hd.h"

namespace mcserve::kernels {

// ν of fla's DPFPFeatureMap as the linear_attn layer builds it.
inline constexpr int kDpfpNu = 4;
// ν of ARMT's DPFP-3 (its associative memory's feature map; same formula, fewer rolls).
inline constexpr int kDpfp3Nu = 3;

// fla "elu": elu(x) + 1.
MCSERVE_HD float FeatureMapElu(float x) { return x > 0.0f ? x + 1.0f : expf(x); }

// fla "relu".
MCSERVE_HD float FeatureMapRelu(float x) { return x > 0.0f ? x : 0.0f; }

// y = W x (+ b) for one row: w [n, d] (row-major, nn.Linear layout), x [d], b [n] or null, y [n].
MCSERVE_HD void FeatureMapAffine(const float* w, const float* b, const float* x, int n, int d, float* y) {
  for (int i = 0; i < n; ++i) {
    const float* wi = w + static_cast<int64_t>(i) * d;
    float acc = 0.0f;
    for (int j = 0; j < d; ++j) acc += wi[j] * x[j];
    y[i] = acc + (b != nullptr ? b[i] : 0.0f);
  }
}

// The same affine map with the weight transposed, wt [d, n]: the inner loop runs over contiguous
// outputs, so it vectorises on the CPU without reassociating sums.
MCSERVE_HD void FeatureMapAffineT(const float* wt, const float* b, const float* x, int n, int d, float* y) {
  for (int i = 0; i < n; ++i) y[i] = b != nullptr ? b[i] : 0.0f;
  for (int j = 0; j < d; ++j) {
    const float* wj = wt + static_cast<int64_t>(j) * n;
    const float xj = x[j];
    for (int i = 0; i < n; ++i) y[i] += wj[i] * xj;
  }
}

// Hedgehog's shift candidate for one y: |2y| (the row max of these, floored at 0, is the shift m).
MCSERVE_HD float HedgehogAbsLogit(float y) { return fabsf(2.0f * y); }

// Hedgehog's unnormalised terms for one y and row shift m: exp(2y − m) and exp(−2y − m).
MCSERVE_HD float HedgehogPos(float y, float m) { return expf(2.0f * y - m); }
MCSERVE_HD float HedgehogNeg(float y, float m) { return expf(-2.0f * y - m); }

// Hedgehog given y = W x + b [d]: out [2d] = softmax([2y, −2y]).
MCSERVE_HD void HedgehogFromAffine(const float* y, int d, float* out) {
  float m = 0.0f;
  for (int i = 0; i < d; ++i) m = fmaxf(m, HedgehogAbsLogit(y[i]));
  float sum = 0.0f;
  for (int i = 0; i < d; ++i) {
    out[i] = HedgehogPos(y[i], m);
    out[d + i] = HedgehogNeg(y[i], m);
    sum += out[i] + out[d + i];
  }
  const float inv = 1.0f / sum;
  for (int i = 0; i < 2 * d; ++i) out[i] *= inv;
}

// One DPFP output, out[(j−1)·2d + i] for j in 1..ν, i < 2d (see DpfpRow).
MCSERVE_HD float DpfpElement(const float* x, int d, int j, int i) {
  const int n = 2 * d;
  int r = (i - j) % n;
  if (r < 0) r += n;
  const float pi = i < d ? FeatureMapRelu(x[i]) : FeatureMapRelu(-x[i - d]);
  const float pr = r < d ? FeatureMapRelu(x[r]) : FeatureMapRelu(-x[r - d]);
  return pi * pr;
}

// DPFP: with p = [relu(x), relu(−x)] (2d), out [2·ν·d] is, for j = 1..ν and i < 2d,
// out[(j−1)·2d + i] = p[i] · p[(i − j) mod 2d]   (fla: cat(p·ν) ⊙ cat(roll(p, j) for j = 1..ν);
// ARMT's DPFP-3 is ν = 3 in the same order).
MCSERVE_HD void DpfpRow(const float* x, int d, int nu, float* out) {
  const int n = 2 * d;
  for (int j = 1; j <= nu; ++j) {
    float* o = out + static_cast<int64_t>(j - 1) * n;
    for (int i = 0; i < n; ++i) o[i] = DpfpElement(x, d, j, i);
  }
}

}  // namespace mcserve::kernels
