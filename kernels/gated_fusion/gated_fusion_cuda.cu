// CUDA GatedFusion: one flat grid-stride loop over the T·D output elements, calling
// gated_fusion_math.h per element.
//
// Launch shape: block = kBlock (256) threads, grid = min(ceil(T·D / 256), kMaxBlocks) blocks, no
// shared memory; element i = r·D + c reads gate[r, c] and gate[r, D + c]. out may alias local or
// global: every element is read and written by the same thread.
#include <algorithm>
#include <cstdint>

#include "base/status_macros.h"
#include "kernels/core/tensor_data.h"
#include "kernels/cuda/cuda_compat.h"
#include "kernels/gated_fusion/gated_fusion.h"
#include "kernels/gated_fusion/gated_fusion_math.h"

namespace {

namespace gf = ::mcserve::kernels::gated_fusion_math;

constexpr int kBlock = 256;
constexpr int64_t kMaxBlocks = 65535;

// gate: [T, 2D]; bias: [2D] or null; local, global, out: [T, D]; n = T·D.
__global__ void GatedFusionKernel(const float* gate, const float* bias, const float* local, const float* global,
                                  float* out, int64_t d, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int64_t r = i / d, c = i % d;
    const float bl = bias != nullptr ? bias[c] : 0.0f, bg = bias != nullptr ? bias[d + c] : 0.0f;
    out[i] = gf::Fuse(gate[r * 2 * d + c], bl, gate[r * 2 * d + d + c], bg, local[i], global[i]);
  }
}

}  // namespace

namespace mcserve::kernels::internal::MCSERVE_CUDA_NS {

using ::mcserve::kernels::MCSERVE_CUDA_NS::KernelStream;
using ::mcserve::kernels::MCSERVE_CUDA_NS::TakeLaunchStatus;

absl::Status GatedFusionCuda(const Context& ctx, const GatedFusionArgs& args) {
  const int64_t d = args.local->dim(1), n = args.local->numel();
  if (n == 0) return absl::OkStatus();
  MCSERVE_ASSIGN_OR_RETURN(cudaStream_t stream, KernelStream());
  const int grid = static_cast<int>(std::min<int64_t>((n + kBlock - 1) / kBlock, kMaxBlocks));
  const float* bias = args.gate_bias != nullptr ? Data<float>(*args.gate_bias) : nullptr;
  MCSERVE_LAUNCH(GatedFusionKernel, grid, kBlock, 0, stream)
  (Data<float>(*args.gate), bias, Data<float>(*args.local), Data<float>(*args.global), Data<float>(*args.out), d, n);
  return TakeLaunchStatus("GatedFusion");
}

}  // namespace mcserve::kernels::internal::MCSERVE_CUDA_NS
