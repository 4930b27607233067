// CUDA Softmax: one block per row. The block reduces the row's max (BlockMax), then the sum of
// exp(x − max) (BlockSum, warp totals added in a fixed order, so the result does not depend on
// scheduling); then every thread writes its columns with softmax_math.h.
//
// Launch shape: grid = rows blocks, block = min(256, n rounded up to 32) threads (whole warps),
// static shared memory 2 × 32 floats; columns c = threadIdx.x + k·blockDim.x. out may alias x: all
// reads for the reductions end at the second barrier, then each element is read and written by
// one thread.
#include <algorithm>
#include <cstdint>

#include "base/status_macros.h"
#include "kernels/core/tensor_data.h"
#include "kernels/cuda/cuda_compat.h"
#include "kernels/cuda/block_reduce.h"
#include "kernels/softmax/softmax.h"
#include "kernels/softmax/softmax_math.h"

namespace {

namespace sm = ::mcserve::kernels::softmax_math;

constexpr int kMaxBlock = 256;

// out[r, :] = softmax(x[r, :]). x, out: [rows, n].
__global__ void SoftmaxKernel(const float* x, int64_t n, float* out) {
  __shared__ float maxes[32];
  __shared__ float sums[32];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * n;
  const float* xr = x + base;
  float m = xr[0];
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x) m = fmaxf(m, xr[c]);
  m = ::mcserve::kernels::MCSERVE_CUDA_NS::BlockMax(m, maxes);
  float s = 0.0f;
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x) s += sm::Weight(xr[c], m);
  const float total = ::mcserve::kernels::MCSERVE_CUDA_NS::BlockSum(s, sums);
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x) out[base + c] = sm::Normalize(sm::Weight(xr[c], m), total);
}

}  // namespace

namespace mcserve::kernels::internal::MCSERVE_CUDA_NS {

using ::mcserve::kernels::MCSERVE_CUDA_NS::KernelStream;
using ::mcserve::kernels::MCSERVE_CUDA_NS::TakeLaunchStatus;

absl::Status SoftmaxCuda(const Context& ctx, const SoftmaxArgs& args) {
  const int64_t rows = args.x->dim(0), n = args.x->dim(1);
  if (rows == 0 || n == 0) return absl::OkStatus();
  MCSERVE_ASSIGN_OR_RETURN(cudaStream_t stream, KernelStream());
  const int block = static_cast<int>(std::min<int64_t>(kMaxBlock, (n + 31) / 32 * 32));
  MCSERVE_LAUNCH(SoftmaxKernel, static_cast<int>(rows), block, 0, stream)
  (Data<float>(*args.x), n, Data<float>(*args.out));
  return TakeLaunchStatus("Softmax");
}

}  // namespace mcserve::kernels::internal::MCSERVE_CUDA_NS
