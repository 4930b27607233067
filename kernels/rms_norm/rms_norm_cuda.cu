// CUDA RmsNorm (optionally with the swish gate): one block per row. The block reduces the row's sum
// of squares (per-thread strided partial sums, a warp xor-shuffle tree, then the warp totals summed
// in a fixed order, so the result does not depend on scheduling), then every thread normalises its
// columns with rms_norm_math.h. The weight (F32/BF16/F16) is widened per element on the fly.
//
// Launch shape: grid = rows blocks, block = min(256, n rounded up to 32) threads (whole warps),
// static shared memory 32 floats (one partial sum per warp); columns c = threadIdx.x + k·blockDim.x.
// out may alias x (or gate): all reads of x for the sum finish at the block barrier before any write,
// and each element is then read and written by the same thread.
#include <algorithm>
#include <cstdint>

#include "base/status_macros.h"
#include "kernels/core/tensor_data.h"
#include "kernels/cuda/cuda_compat.h"
#include "kernels/cuda/block_reduce.h"
#include "kernels/rms_norm/rms_norm.h"
#include "kernels/rms_norm/rms_norm_math.h"

namespace {

namespace km = ::mcserve::kernels;
namespace rm = ::mcserve::kernels::rms_norm_math;

constexpr int kMaxBlock = 256;

// Element c of a weight vector stored as `dtype` (F32, BF16 or F16), widened to F32.
__device__ __forceinline__ float LoadWeight(const void* w, km::DType dtype, int64_t c) {
  switch (dtype) {
    case km::DType::kBF16: return km::Bf16ToF32(static_cast<const uint16_t*>(w)[c]);
    case km::DType::kF16: return km::F16ToF32(static_cast<const uint16_t*>(w)[c]);
    default: return static_cast<const float*>(w)[c];
  }
}

// out[r, :] = x[r, :] · rsqrt(mean(x[r, :]²) + eps) · w (· swish(g[r, :]) when kGated).
// x, g, out: [rows, n]; w: [n] of w_dtype.
template <bool kGated>
__global__ void RmsNormKernel(const float* x, const void* w, km::DType w_dtype, const float* g, int64_t n, float eps,
                              float* out) {
  __shared__ float warp_sums[32];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * n;
  const float* xr = x + base;
  float ss = 0.0f;
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x) ss += xr[c] * xr[c];
  ss = ::mcserve::kernels::MCSERVE_CUDA_NS::BlockSum(ss, warp_sums);
  const float inv = rm::InvRmsFromSumSq(ss, n, eps);
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x) {
    const float wc = LoadWeight(w, w_dtype, c);
    if constexpr (kGated) {
      out[base + c] = rm::NormalizeElementGated(xr[c], inv, wc, g[base + c]);
    } else {
      out[base + c] = rm::NormalizeElement(xr[c], inv, wc);
    }
  }
}

}  // namespace

namespace mcserve::kernels::internal::MCSERVE_CUDA_NS {

using ::mcserve::kernels::MCSERVE_CUDA_NS::KernelStream;
using ::mcserve::kernels::MCSERVE_CUDA_NS::TakeLaunchStatus;

absl::Status RmsNormCuda(const Context& ctx, const RmsNormArgs& args) {
  const int64_t rows = args.x->dim(0), n = args.x->dim(1);
  if (rows == 0 || n == 0) return absl::OkStatus();
  MCSERVE_ASSIGN_OR_RETURN(cudaStream_t stream, KernelStream());
  const int block = static_cast<int>(std::min<int64_t>(kMaxBlock, (n + 31) / 32 * 32));
  const int grid = static_cast<int>(rows);
  const float* x = Data<float>(*args.x);
  const void* w = RawData(*args.weight);
  float* out = Data<float>(*args.out);
  if (args.gate != nullptr) {
    MCSERVE_LAUNCH(RmsNormKernel<true>, grid, block, 0, stream)
    (x, w, args.weight->dtype(), Data<float>(*args.gate), n, args.eps, out);
  } else {
    MCSERVE_LAUNCH(RmsNormKernel<false>, grid, block, 0, stream)
    (x, w, args.weight->dtype(), static_cast<const float*>(nullptr), n, args.eps, out);
  }
  return TakeLaunchStatus("RmsNorm");
}

}  // namespace mcserve::kernels::internal::MCSERVE_CUDA_NS
