// Per-element math of Gate (decay factors), shared by the CPU and CUDA backends. Numerically
// stable forms: softplus as torch (x > 20 → x), logsigmoid(x) = min(x, 0) − log1p(e^−|x|).
#pragma once

#include <cmath>

#include "kernels/core/hd.h"

namespace mcserve::kernels::gate_math {

// log(1 + e^x), torch's F.softplus with beta 1, threshold 20.
MCSERVE_HD float Softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

// log(sigmoid(x)) without overflow for large |x|.
MCSERVE_HD float LogSigmoid(float x) { return fminf(x, 0.0f) - log1pf(expf(-fabsf(x))); }

// GDN/SWLA decay: exp(−exp(a_log) · softplus(x + dt_bias)).
MCSERVE_HD float SoftplusDecay(float x, float a_log, float dt_bias) {
  return expf(-expf(a_log) * Softplus(x + dt_bias));
}

// GLA decay: exp(max(logsigmoid(x) / normalizer, clamp_min)), clamp only when has_clamp.
MCSERVE_HD float LogSigmoidDecay(float x, float normalizer, bool has_clamp, float clamp_min) {
  float g = LogSigmoid(x) / normalizer;
  if (has_clamp) g = fmaxf(g, clamp_min);
  return expf(g);
}

}  // namespace mcserve::kernels::gate_math
