// CUDA Gate: the kernel lands with the CUDA backend issue; this compiles the op's CUDA entry and
// proves gate_math.h builds as __host__ __device__.
#include "kernels/cuda/cuda_compat.h"
#include "kernels/gate/gate.h"
#include "kernels/gate/gate_math.h"

namespace mcserve::kernels::internal::MCSERVE_CUDA_NS {

absl::Status GateCuda(const Context& ctx, const GateArgs& args) {
  return absl::UnimplementedError("Gate: CUDA kernel not implemented yet");
}

}  // namespace mcserve::kernels::internal::MCSERVE_CUDA_NS
