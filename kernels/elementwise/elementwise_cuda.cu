// CUDA element-wise ops: kernels land with the CUDA backend issue; this compiles the ops' CUDA
// entries and proves elementwise_math.h builds as __host__ __device__.
#include "kernels/cuda/cuda_compat.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/elementwise/elementwise_math.h"

namespace mcserve::kernels::internal::MCSERVE_CUDA_NS {

absl::Status ActivationCuda(const Context& ctx, const ActivationArgs& args) {
  return absl::UnimplementedError("Activation: CUDA kernel not implemented yet");
}

absl::Status AddCuda(const Context& ctx, const AddArgs& args) {
  return absl::UnimplementedError("Add: CUDA kernel not implemented yet");
}

absl::Status SwiGluCuda(const Context& ctx, const SwiGluArgs& args) {
  return absl::UnimplementedError("SwiGlu: CUDA kernel not implemented yet");
}

}  // namespace mcserve::kernels::internal::MCSERVE_CUDA_NS
