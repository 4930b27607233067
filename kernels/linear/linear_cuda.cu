// CUDA Linear: cuBLAS GEMM lands with the CUDA backend issue; this compiles the op's CUDA entry.
#include "kernels/cuda/cuda_compat.h"
#include "kernels/linear/linear.h"
#include "kernels/linear/linear_math.h"

namespace mcserve::kernels::internal::MCSERVE_CUDA_NS {

absl::Status LinearCuda(const Context& ctx, const LinearArgs& args) {
  return absl::UnimplementedError("Linear: CUDA kernel not implemented yet");
}

}  // namespace mcserve::kernels::internal::MCSERVE_CUDA_NS
