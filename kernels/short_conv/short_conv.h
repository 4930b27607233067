// ShortConv: fla's causal depthwise ShortConvolution, y_t = act(Σ_j w[d,j]·x_{t−W+1+j} (+ b[d])),
// over a varlen batch whose per-sequence history (the last W−1 inputs) lives in a state slot.
// Prefill chunks and one-token decode are the same call. Any thread; calls sharing a Context.pool must not overlap.
#pragma once

#include "absl/status/status.h"
#include "kernels/core/batch_layout.h"
#include "kernels/core/context.h"
#include "kernels/core/tensor.h"

namespace mcserve::kernels {

struct ShortConvArgs {
  const Tensor* x = nullptr;       // [T, D] F32
  const Tensor* weight = nullptr;  // [D, 1, W] F32 | BF16 | F16 (as stored by fla / nn.Conv1d)
  const Tensor* bias = nullptr;    // optional [D]
  bool silu = true;                // apply SiLU after the convolution
  BatchLayout layout;
  Tensor* state = nullptr;         // [num_slots, W−1, D] F32: the previous W−1 inputs, oldest first
  Tensor* out = nullptr;           // [T, D] F32 (must not alias x)
};

absl::Status ShortConv(const Context& ctx, const ShortConvArgs& args);

// ShortConv's checks of args (device, dtypes, shapes, batch layout), for ops that run a conv inside
// them (DeltaDecode). Any thread.
absl::Status ValidateShortConv(const Context& ctx, const ShortConvArgs& args);

namespace internal {
absl::Status ShortConvCpu(const Context& ctx, const ShortConvArgs& args);
namespace cuda {  // short_conv_cuda.cu compiled by nvcc
absl::Status ShortConvCuda(const Context& ctx, const ShortConvArgs& args);
}  // namespace cuda
namespace cuda_emu {  // the same source on the CUDA emulator
absl::Status ShortConvCuda(const Context& ctx, const ShortConvArgs& args);
}  // namespace cuda_emu
}  // namespace internal

}  // namespace mcserve::kernels
