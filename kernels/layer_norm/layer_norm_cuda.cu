// CUDA LayerNorm: one block per row. The block reduces the row's sum (mean), then its sum of squared
// deviations from the mean (variance), each as per-thread strided partial sums, a warp xor-shuffle
// tree and the warp totals added in a fixed order (BlockSum), so the result does not depend on
// scheduling; then every thread normalises its columns with layer_norm_math.h.
//
// Launch shape: grid = rows blocks, block = min(256, n rounded up to 32) threads (whole warps),
// static shared memory 2 × 32 floats (one partial sum per warp and reduction); columns
// c = threadIdx.x + k·blockDim.x. out may alias x: every read of x for the sums ends at the second
// reduction's barrier before any write, and each element is then read and written by one thread.
#include <algorithm>
#include <cstdint>

#include "base/status_macros.h"
#include "kernels/core/tensor_data.h"
#include "kernels/cuda/cuda_compat.h"
#include "kernels/cuda/block_reduce.h"
#include "kernels/layer_norm/layer_norm.h"
#include "kernels/layer_norm/layer_norm_math.h"

namespace {

namespace lm = ::mcserve::kernels::layer_norm_math;

constexpr int kMaxBlock = 256;

// out[r, :] = (x[r, :] − mean) · rsqrt(var + eps) · w + b. x, out: [rows, n]; w, b: [n].
__global__ void LayerNormKernel(const float* x, const float* w, const float* b, int64_t n, float eps, float* out) {
  __shared__ float sums[32];
  __shared__ float sq_sums[32];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * n;
  const float* xr = x + base;
  float s = 0.0f;
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x) s += xr[c];
  const float mean = lm::MeanFromSum(::mcserve::kernels::MCSERVE_CUDA_NS::BlockSum(s, sums), n);
  float ssd = 0.0f;
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x) {
    const float d = xr[c] - mean;
    ssd += d * d;
  }
  const float inv = lm::InvStdFromSumSq(::mcserve::kernels::MCSERVE_CUDA_NS::BlockSum(ssd, sq_sums), n, eps);
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x) {
    out[base + c] = lm::NormalizeElement(xr[c], mean, inv, w[c], b[c]);
  }
}

}  // namespace

namespace mcserve::kernels::internal::MCSERVE_CUDA_NS {

using ::mcserve::kernels::MCSERVE_CUDA_NS::KernelStream;
using ::mcserve::kernels::MCSERVE_CUDA_NS::TakeLaunchStatus;

absl::Status LayerNormCuda(const Context& ctx, const LayerNormArgs& args) {
  const int64_t rows = args.x->dim(0), n = args.x->dim(1);
  if (rows == 0 || n == 0) return absl::OkStatus();
  MCSERVE_ASSIGN_OR_RETURN(cudaStream_t stream, KernelStream());
  const int block = static_cast<int>(std::min<int64_t>(kMaxBlock, (n + 31) / 32 * 32));
  MCSERVE_LAUNCH(LayerNormKernel, static_cast<int>(rows), block, 0, stream)
  (Data<float>(*args.x), Data<float>(*args.weight), Data<float>(*args.bias), n, args.eps, Data<float>(*args.out));
  return TakeLaunchStatus("LayerNorm");
}

}  // namespace mcserve::kernels::internal::MCSERVE_CUDA_NS
