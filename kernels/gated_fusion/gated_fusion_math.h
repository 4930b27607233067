// Per-element math of GatedFusion shared by the CPU and CUDA backends (fp32).
#pragma once

#include <cmath>

#include "kernels/core/hd.h"

namespace mcserve::kernels::gated_fusion_math {

// 1 / (1 + e^-x).
MCSERVE_HD float Sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// sigmoid(gl + bl) · local + sigmoid(gg + bg) · global for one channel.
MCSERVE_HD float Fuse(float gl, float bl, float gg, float bg, float local, float global) {
  return Sigmoid(gl + bl) * local + Sigmoid(gg + bg) * global;
}

}  // namespace mcserve::kernels::gated_fusion_math
