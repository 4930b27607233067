// CUDA FeatureMap: the kernel lands with the CUDA backend issue; until then this compiles the math
// for the device (the probe kernel) and reports the op as unimplemented.
#include "kernels/cuda/cuda_compat.h"
#include "kernels/feature_map/feature_map.h"
#include "kernels/feature_map/feature_map_math.h"

namespace mcserve::kernels::internal::MCSERVE_CUDA_NS {

// Not launched: makes nvcc compile feature_map_math.h as device code.
__global__ void FeatureMapMathProbe(const float* w, const float* x, float* y, float* out, int d) {
  FeatureMapAffine(w, nullptr, x, d, d, y);
  HedgehogFromAffine(y, d, out);
  DpfpRow(x, d, out);
  out[0] = FeatureMapElu(x[0]) + FeatureMapRelu(x[1]);
}

absl::Status FeatureMapCuda(const Context& ctx, const FeatureMapArgs& args) {
  return absl::UnimplementedError("FeatureMap: CUDA kernel not implemented yet");
}

}  // namespace mcserve::kernels::internal::MCSERVE_CUDA_NS
