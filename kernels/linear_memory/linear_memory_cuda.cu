// CUDA LinearMemory: the kernels land with the CUDA backend issue; until then this compiles the
// per-step math for the device (the probe kernel) and reports the op as unimplemented.
#include "kernels/cuda/cuda_compat.h"
#include "kernels/linear_memory/linear_memory.h"
#include "kernels/linear_memory/linear_memory_math.h"

namespace mcserve::kernels::internal::MCSERVE_CUDA_NS {

// Not launched: makes nvcc compile linear_memory_math.h as device code.
__global__ void LinearMemoryMathProbe(float* S, float* aux, const float* q, const float* k, const float* v,
                                      float* o, float* scratch, int K, int V) {
  AdditiveStep(S, q, k, v, nullptr, K, V, o);
  NormalizeStep(aux, q, k, K, V, o);
  GatedDeltaStep(S, q, k, v, 0.9f, 0.5f, K, V, o, scratch);
  SwlaStep(S, q, k, v, 0.9f, 0.5f, 0.5f, K, V, aux, o);
  TitansStep(S, aux, q, k, v, 0.9f, 0.1f, 0.5f, K, V, o, scratch);
  ReadOut(S, q, K, V, o);
}

absl::Status LinearMemoryCuda(const Context& ctx, const LinearMemoryArgs& args) {
  return absl::UnimplementedError("LinearMemory: CUDA kernel not implemented yet");
}

}  // namespace mcserve::kernels::internal::MCSERVE_CUDA_NS
