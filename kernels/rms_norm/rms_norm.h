// RmsNorm: out = x · rsqrt(mean(x²) + eps) · w, per row, in fp32; optionally gated
// (fla FusedRMSNormGated with swish: out *= g · sigmoid(g)). Per-head norms pass rows = T·heads.
// Any thread; calls sharing a Context.pool must not overlap.
#pragma once

#include "absl/status/status.h"
#include "kernels/core/context.h"
#include "kernels/core/tensor.h"

namespace mcserve::kernels {

struct RmsNormArgs {
  const Tensor* x = nullptr;       // [rows, n] F32
  const Tensor* weight = nullptr;  // [n] F32 | BF16 | F16
  const Tensor* gate = nullptr;    // optional [rows, n] F32: multiply by swish(gate)
  float eps = 1e-6f;
  Tensor* out = nullptr;           // [rows, n] F32 (may alias x)
};

absl::Status RmsNorm(const Context& ctx, const RmsNormArgs& args);

namespace internal {
absl::Status RmsNormCpu(const Context& ctx, const RmsNormArgs& args);
namespace cuda {  // rms_norm_cuda.cu compiled by nvcc
absl::Status RmsNormCuda(const Context& ctx, const RmsNormArgs& args);
}  // namespace cuda
namespace cuda_emu {  // the same source on the CUDA emulator
absl::Status RmsNormCuda(const Context& ctx, const RmsNormArgs& args);
}  // namespace cuda_emu
}  // namespace internal

}  // namespace mcserve::kernels
