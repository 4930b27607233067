// Softmax: out[r, :] = exp(x[r, :] − max) / Σ exp(x[r, :] − max) per row, in fp32 (GAM's memory-bank
// slot weights). Any thread; calls sharing a Context.pool must not overlap.
#pragma once

#include "absl/status/status.h"
#include "kernels/core/context.h"
#include "kernels/core/tensor.h"

namespace mcserve::kernels {

struct SoftmaxArgs {
  const Tensor* x = nullptr;  // [rows, n] F32
  Tensor* out = nullptr;      // [rows, n] F32 (may alias x)
};

absl::Status Softmax(const Context& ctx, const SoftmaxArgs& args);

namespace internal {
absl::Status SoftmaxCpu(const Context& ctx, const SoftmaxArgs& args);
namespace cuda {  // softmax_cuda.cu compiled by nvcc
absl::Status SoftmaxCuda(const Context& ctx, const SoftmaxArgs& args);
}  // namespace cuda
namespace cuda_emu {  // the same source on the CUDA emulator
absl::Status SoftmaxCuda(const Context& ctx, const SoftmaxArgs& args);
}  // namespace cuda_emu
}  // namespace internal

}  // namespace mcserve::kernels
