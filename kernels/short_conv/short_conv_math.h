// ShortConv per-element math shared by the CPU and CUDA backends (plain C++, nvcc-compatible).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/core/hd.h"

namespace mcserve::kernels {

// SiLU: x · sigmoid(x).
MCSERVE_HD float ShortConvSilu(float x) { return x / (1.0f + expf(-x)); }

// The row holding the input at position s of a sequence (s < 0 reaches into the history):
// state rows are the previous W−1 inputs, oldest first, so position −1 is state row W−2.
// state: [W−1, D] of this slot; x: [L, D] rows of this sequence.
MCSERVE_HD const float* ShortConvSourceRow(const float* state, const float* x, int64_t s, int width,
                                           int64_t d) {
  return s < 0 ? state + (width - 1 + s) * d : x + s * d;
}

// Adds the bias and applies the optional SiLU to one accumulated convolution output.
MCSERVE_HD float ShortConvFinish(float acc, float bias, bool silu) {
  float y = acc + bias;
  return silu ? ShortConvSilu(y) : y;
}

}  // namespace mcserve::kernels
