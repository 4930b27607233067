// CUDA ShortConv: the kernel lands with the CUDA backend issue; until then this compiles the math
// for the device (the probe kernel) and reports the op as unimplemented.
#include "kernels/cuda/cuda_compat.h"
#include "kernels/short_conv/short_conv.h"
#include "kernels/short_conv/short_conv_math.h"

namespace mcserve::kernels::internal::MCSERVE_CUDA_NS {

// Not launched: makes nvcc compile short_conv_math.h as device code.
__global__ void ShortConvMathProbe(const float* state, const float* x, float* y, int width, int64_t d) {
  const float* row = ShortConvSourceRow(state, x, -1, width, d);
  y[0] = ShortConvFinish(row[0], 0.5f, true);
}

absl::Status ShortConvCuda(const Context& ctx, const ShortConvArgs& args) {
  return absl::UnimplementedError("ShortConv: CUDA kernel not implemented yet");
}

}  // namespace mcserve::kernels::internal::MCSERVE_CUDA_NS
