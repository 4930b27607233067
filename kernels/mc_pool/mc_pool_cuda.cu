// CUDA McSegmentPool lands with the CUDA backend issue; the probe compiles the shared math as device code.
#include "kernels/cuda/cuda_compat.h"
#include "kernels/mc_pool/mc_pool.h"
#include "kernels/mc_pool/mc_pool_math.h"

namespace mcserve::kernels::internal::MCSERVE_CUDA_NS {

__global__ void McSegmentPoolProbe(float* sum, const float* k, int64_t dim, float* out) {
  mc_pool_math::PoolRow(sum, k, dim, 1, true, true, out);
}

__global__ void McLevelPoolProbe(float* sums, const float* k, int64_t dim, float* out) {
  mc_pool_math::LevelPoolRow(sums, k, dim, 4, 3, true, out);
}

absl::Status McLevelPoolCuda(const Context& ctx, const McLevelPoolArgs& args) {
  return absl::UnimplementedError("McLevelPool: CUDA kernel not implemented yet");
}

absl::Status McSegmentPoolCuda(const Context& ctx, const McSegmentPoolArgs& args) {
  return absl::UnimplementedError("McSegmentPool: CUDA kernel not implemented yet");
}

}  // namespace mcserve::kernels::internal::MCSERVE_CUDA_NS
