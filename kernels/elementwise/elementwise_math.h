// Per-element math of the element-wise ops, shared by the CPU and CUDA backends.
#pragma once

#include <cmath>

#include "kernels/core/hd.h"
#include "kernels/elementwise/elementwise.h"

namespace mcserve::kernels::elementwise_math {

// 1 / (1 + e^-x), saturating cleanly to 0 and 1.
MCSERVE_HD float Sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// x · sigmoid(x).
MCSERVE_HD float Silu(float x) { return x * Sigmoid(x); }

// elu(x) + 1: x + 1 for x > 0, else e^x (exact form of (e^x − 1) + 1).
MCSERVE_HD float EluPlusOne(float x) { return x > 0.0f ? x + 1.0f : expf(x); }

// Exact GELU: x·Φ(x) = ½x·erfc(−x/√2) (erfc keeps the negative tail accurate, where 1 + erf cancels).
MCSERVE_HD float Gelu(float x) { return 0.5f * x * erfcf(-x * 0.70710678118654752f); }

// tanh GELU (GPT-2's "gelu_new"): ½x·(1 + tanh(u)), u = √(2/π)·(x + 0.044715·x³), computed as
// x / (1 + e^(−2u)) (the same value; 1 + tanh(u) cancels in the negative tail, this does not).
MCSERVE_HD float GeluTanh(float x) {
  const float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
  return x / (1.0f + expf(-2.0f * u));
}

// act(x) for one element.
MCSERVE_HD float Activate(ActivationKind kind, float x) {
  switch (kind) {
    case ActivationKind::kIdentity: return x;
    case ActivationKind::kSilu: return Silu(x);
    case ActivationKind::kSigmoid: return Sigmoid(x);
    case ActivationKind::kRelu: return x > 0.0f ? x : 0.0f;
    case ActivationKind::kEluPlusOne: return EluPlusOne(x);
    case ActivationKind::kGelu: return Gelu(x);
    case ActivationKind::kGeluTanh: return GeluTanh(x);
  }
  return x;
}

// silu(gate) · up: the SwiGLU combination.
MCSERVE_HD float SwiGlu(float gate, float up) { return Silu(gate) * up; }

}  // namespace mcserve::kernels::elementwise_math
