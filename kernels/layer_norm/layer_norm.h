// LayerNorm: out = (x − mean(x)) · rsqrt(var(x) + eps) · w + b per row (biased variance, as
// torch.nn.LayerNorm), in fp32. GAM's ln1, ln2 and ln_f. Any thread; calls sharing a Context.pool
// must not overlap.
#pragma once

#include "absl/status/status.h"
#include "kernels/core/context.h"
#include "kernels/core/tensor.h"

namespace mcserve::kernels {

struct LayerNormArgs {
  const Tensor* x = nullptr;       // [rows, n] F32
  const Tensor* weight = nullptr;  // [n] F32
  const Tensor* bias = nullptr;    // [n] F32
  float eps = 1e-5f;
  Tensor* out = nullptr;           // [rows, n] F32 (may alias x)
};

absl::Status LayerNorm(const Context& ctx, const LayerNormArgs& args);

namespace internal {
absl::Status LayerNormCpu(const Context& ctx, const LayerNormArgs& args);
namespace cuda {  // layer_norm_cuda.cu compiled by nvcc
absl::Status LayerNormCuda(const Context& ctx, const LayerNormArgs& args);
}  // namespace cuda
namespace cuda_emu {  // the same source on the CUDA emulator
absl::Status LayerNormCuda(const Context& ctx, const LayerNormArgs& args);
}  // namespace cuda_emu
}  // namespace internal

}  // namespace mcserve::kernels
