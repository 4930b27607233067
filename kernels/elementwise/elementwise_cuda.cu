// CUDA element-wise ops (Activation, Add, SwiGlu): one flat grid-stride loop per op over all
// elements, calling elementwise_math.h per element.
//
// Launch shape (all three kernels): block = kBlock (256) threads, grid = min(ceil(n / 256),
// kMaxBlocks) blocks, no shared memory; each thread handles elements i, i + gridDim·blockDim, ...
// so any n (not a multiple of 256, or larger than the grid) is covered. Outputs may alias inputs:
// every element is read and written by the same thread.
#include <algorithm>
#include <cstdint>

#include "base/status_macros.h"
#include "kernels/core/tensor_data.h"
#include "kernels/cuda/cuda_compat.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/elementwise/elementwise_math.h"

namespace {

namespace em = ::mcserve::kernels::elementwise_math;
using ::mcserve::kernels::ActivationKind;

constexpr int kBlock = 256;
constexpr int64_t kMaxBlocks = 65535;

// Blocks for a grid-stride loop over n > 0 elements.
int GridFor(int64_t n) { return static_cast<int>(std::min<int64_t>((n + kBlock - 1) / kBlock, kMaxBlocks)); }

// out[i] = scale · act(x[i]); x, out: [n] (may alias).
__global__ void ActivationKernel(const float* x, float* out, int64_t n, ActivationKind kind, float scale) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    out[i] = scale * em::Activate(kind, x[i]);
  }
}

// out[i] = a[i] + b[i]; a, b, out: [n] (out may alias a or b).
__global__ void AddKernel(const float* a, const float* b, float* out, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    out[i] = a[i] + b[i];
  }
}

// out[i] = act(gate[i]) · up[i] (SiLU: the SwiGLU form); gate, up, out: [n] (out may alias gate or up).
__global__ void SwiGluKernel(const float* gate, const float* up, float* out, int64_t n,
                             mcserve::kernels::ActivationKind act) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    out[i] = act == mcserve::kernels::ActivationKind::kSilu ? em::SwiGlu(gate[i], up[i])
                                                            : em::Activate(act, gate[i]) * up[i];
  }
}

}  // namespace

namespace mcserve::kernels::internal::MCSERVE_CUDA_NS {

using ::mcserve::kernels::MCSERVE_CUDA_NS::KernelStream;
using ::mcserve::kernels::MCSERVE_CUDA_NS::TakeLaunchStatus;

absl::Status ActivationCuda(const Context& ctx, const ActivationArgs& args) {
  const int64_t n = args.x->numel();
  if (n == 0) return absl::OkStatus();
  MCSERVE_ASSIGN_OR_RETURN(cudaStream_t stream, KernelStream());
  MCSERVE_LAUNCH(ActivationKernel, GridFor(n), kBlock, 0, stream)
  (Data<float>(*args.x), Data<float>(*args.out), n, args.kind, args.scale);
  return TakeLaunchStatus("Activation");
}

absl::Status AddCuda(const Context& ctx, const AddArgs& args) {
  const int64_t n = args.a->numel();
  if (n == 0) return absl::OkStatus();
  MCSERVE_ASSIGN_OR_RETURN(cudaStream_t stream, KernelStream());
  MCSERVE_LAUNCH(AddKernel, GridFor(n), kBlock, 0, stream)
  (Data<float>(*args.a), Data<float>(*args.b), Data<float>(*args.out), n);
  return TakeLaunchStatus("Add");
}

absl::Status SwiGluCuda(const Context& ctx, const SwiGluArgs& args) {
  const int64_t n = args.gate->numel();
  if (n == 0) return absl::OkStatus();
  MCSERVE_ASSIGN_OR_RETURN(cudaStream_t stream, KernelStream());
  MCSERVE_LAUNCH(SwiGluKernel, GridFor(n), kBlock, 0, stream)
  (Data<float>(*args.gate), Data<float>(*args.up), Data<float>(*args.out), n, args.act);
  return TakeLaunchStatus("SwiGlu");
}

}  // namespace mcserve::kernels::internal::MCSERVE_CUDA_NS
