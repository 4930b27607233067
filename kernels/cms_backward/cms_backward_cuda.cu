// CUDA CMS backward ops: one thread per row (RmsNormBackward, XentGrad: the row's sums run serially
// in index order, as on the CPU) or per element (GluBackward, Transpose), so both backends agree bit
// for bit. Launch shape: 1-D grid of 256-thread blocks over rows or elements; no shared memory.
#include <cstdint>

#include "base/status_macros.h"
#include "kernels/cms_backward/cms_backward.h"
#include "kernels/cms_backward/cms_backward_math.h"
#include "kernels/core/tensor_data.h"
#include "kernels/cuda/cuda_compat.h"

namespace {

namespace bm = ::mcserve::kernels::cms_backward_math;

constexpr int kBlock = 256;

int Blocks(int64_t n) { return static_cast<int>((n + kBlock - 1) / kBlock); }

// Row r = blockIdx.x·blockDim.x + threadIdx.x < rows of x, dy, dx [rows, n].
__global__ void RmsNormBackwardKernel(const float* x, const float* w, const float* dy, int64_t rows, int64_t n,
                                      float eps, float* dx) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r < rows) bm::RmsNormBackwardRow(x + r * n, w, dy + r * n, n, eps, dx + r * n);
}

// Row r of logits, grad [rows, v].
__global__ void XentGradKernel(const float* logits, const int32_t* targets, int64_t rows, int64_t v, float* grad) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r < rows) bm::XentGradRow(logits + r * v, targets[r], v, grad + r * v);
}

// Element i < n; gate/dgate null for GELU.
__global__ void GluBackwardKernel(const float* gate, const float* up, const float* dm, int64_t n, float* dgate,
                                  float* dup) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  if (gate == nullptr) {
    dup[i] = bm::GeluBackward(up[i], dm[i]);
  } else {
    bm::SwiGluBackward(gate[i], up[i], dm[i], dgate + i, dup + i);
  }
}

// Element i < rows·cols of x [rows, cols] → out [cols, rows].
__global__ void TransposeKernel(const float* x, int64_t rows, int64_t cols, float* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < rows * cols) out[(i % cols) * rows + i / cols] = x[i];
}

}  // namespace

namespace mcserve::kernels::internal::MCSERVE_CUDA_NS {

using ::mcserve::kernels::MCSERVE_CUDA_NS::KernelStream;
using ::mcserve::kernels::MCSERVE_CUDA_NS::TakeLaunchStatus;

absl::Status RmsNormBackwardCuda(const Context&, const RmsNormBackwardArgs& a) {
  const int64_t rows = a.x->dim(0), n = a.x->dim(1);
  if (rows == 0 || n == 0) return absl::OkStatus();
  MCSERVE_ASSIGN_OR_RETURN(cudaStream_t stream, KernelStream());
  MCSERVE_LAUNCH(RmsNormBackwardKernel, Blocks(rows), kBlock, 0, stream)
  (Data<float>(*a.x), Data<float>(*a.weight), Data<float>(*a.dy), rows, n, a.eps, Data<float>(*a.dx));
  return TakeLaunchStatus("RmsNormBackward");
}

absl::Status XentGradCuda(const Context&, const XentGradArgs& a) {
  const int64_t rows = a.logits->dim(0), v = a.logits->dim(1);
  if (rows == 0) return absl::OkStatus();
  MCSERVE_ASSIGN_OR_RETURN(cudaStream_t stream, KernelStream());
  MCSERVE_LAUNCH(XentGradKernel, Blocks(rows), kBlock, 0, stream)
  (Data<float>(*a.logits), Data<int32_t>(*a.targets), rows, v, Data<float>(*a.grad));
  return TakeLaunchStatus("XentGrad");
}

absl::Status GluBackwardCuda(const Context&, const GluBackwardArgs& a) {
  const int64_t n = a.up->numel();
  if (n == 0) return absl::OkStatus();
  MCSERVE_ASSIGN_OR_RETURN(cudaStream_t stream, KernelStream());
  MCSERVE_LAUNCH(GluBackwardKernel, Blocks(n), kBlock, 0, stream)
  (a.gate ? Data<float>(*a.gate) : nullptr, Data<float>(*a.up), Data<float>(*a.dm), n,
   a.dgate ? Data<float>(*a.dgate) : nullptr, Data<float>(*a.dup));
  return TakeLaunchStatus("GluBackward");
}

absl::Status TransposeCuda(const Context&, const TransposeArgs& a) {
  const int64_t rows = a.x->dim(0), cols = a.x->dim(1);
  if (rows * cols == 0) return absl::OkStatus();
  MCSERVE_ASSIGN_OR_RETURN(cudaStream_t stream, KernelStream());
  MCSERVE_LAUNCH(TransposeKernel, Blocks(rows * cols), kBlock, 0, stream)
  (Data<float>(*a.x), rows, cols, Data<float>(*a.out));
  return TakeLaunchStatus("Transpose");
}

}  // namespace mcserve::kernels::internal::MCSERVE_CUDA_NS
