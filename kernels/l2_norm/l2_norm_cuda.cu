// CUDA L2Norm (L2 or sum row normalisation): one block per row. The block reduces Σx² or Σx
// (per-thread strided partial sums, a warp xor-shuffle tree, then the warp totals summed in a fixed
// order, so the result does not depend on scheduling), turns it into the row factor with
// l2_norm_math.h, and every thread scales its columns.
//
// Launch shape: grid = rows blocks, block = min(256, n rounded up to 32) threads (whole warps),
// static shared memory 32 floats (one partial sum per warp); columns c = threadIdx.x + k·blockDim.x.
// out may alias x: all reads of x for the sum finish at the block barrier before any write, and each
// element is then read and written by the same thread.
#include <algorithm>
#include <cstdint>

#include "base/status_macros.h"
#include "kernels/core/tensor_data.h"
#include "kernels/cuda/cuda_compat.h"
#include "kernels/cuda/block_reduce.h"
#include "kernels/l2_norm/l2_norm.h"
#include "kernels/l2_norm/l2_norm_math.h"

namespace {

namespace km = ::mcserve::kernels;
namespace lm = ::mcserve::kernels::l2_norm_math;

constexpr int kMaxBlock = 256;

// out[r, :] = x[r, :] · FactorFromSum(kind, Σx[r, :]² or Σx[r, :]); x, out: [rows, n].
__global__ void L2NormKernel(const float* x, int64_t n, km::RowNormKind kind, float eps, float scale, float* out) {
  __shared__ float warp_sums[32];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * n;
  const float* xr = x + base;
  const bool square = kind == km::RowNormKind::kL2;
  float sum = 0.0f;
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x) sum += square ? xr[c] * xr[c] : xr[c];
  sum = ::mcserve::kernels::MCSERVE_CUDA_NS::BlockSum(sum, warp_sums);
  const float factor = lm::FactorFromSum(kind, sum, eps, scale);
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x) out[base + c] = xr[c] * factor;
}

}  // namespace

namespace mcserve::kernels::internal::MCSERVE_CUDA_NS {

using ::mcserve::kernels::MCSERVE_CUDA_NS::KernelStream;
using ::mcserve::kernels::MCSERVE_CUDA_NS::TakeLaunchStatus;

absl::Status L2NormCuda(const Context& ctx, const L2NormArgs& args) {
  const int64_t rows = args.x->dim(0), n = args.x->dim(1);
  if (rows == 0 || n == 0) return absl::OkStatus();
  MCSERVE_ASSIGN_OR_RETURN(cudaStream_t stream, KernelStream());
  const int block = static_cast<int>(std::min<int64_t>(kMaxBlock, (n + 31) / 32 * 32));
  MCSERVE_LAUNCH(L2NormKernel, static_cast<int>(rows), block, 0, stream)
  (Data<float>(*args.x), n, args.kind, args.eps, args.scale, Data<float>(*args.out));
  return TakeLaunchStatus("L2Norm");
}

}  // namespace mcserve::kernels::internal::MCSERVE_CUDA_NS
