// CUDA McReadout: the kernels land with the CUDA backend issue; until then this compiles the
// per-token math for the device (the probe kernel) and reports the op as unimplemented.
#include "kernels/cuda/cuda_compat.h"
#include "kernels/mc_readout/mc_readout.h"
#include "kernels/mc_readout/mc_readout_math.h"

namespace mcserve::kernels::internal::MCSERVE_CUDA_NS {

// Not launched: makes nvcc compile mc_readout_math.h as device code. One (token, head): scores of
// n pages, top-k gate, online and page read-outs.
__global__ void McReadoutMathProbe(const float* S, const float* q, const float* u, const float* pool,
                                   const float* pool_on, const float* o_on, float* scores, unsigned char* keep,
                                   int n, int top_k, int K, int V, float* y) {
  for (int i = 0; i < n; ++i) scores[i] = mc_readout_math::Dot(u, pool + i * K, K);
  const float z_on = mc_readout_math::Dot(u, pool_on, K);
  const float g_on = mc_readout_math::GateWeights(scores, n, z_on, top_k, keep);
  mc_readout_math::ScaleOnline(o_on, g_on, V, y);
  for (int i = 0; i < n; ++i) mc_readout_math::AccumulateReadOut(S + i * K * V, q, scores[i], K, V, y);
}

absl::Status McReadoutCuda(const Context& ctx, const McReadoutArgs& args) {
  return absl::UnimplementedError("McReadout: CUDA kernel not implemented yet");
}

}  // namespace mcserve::kernels::internal::MCSERVE_CUDA_NS
