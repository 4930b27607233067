// Backward ops of the adaptive CMS's test-time training (docs/model-format.md, `hope`, cms_adaptive):
// RMSNorm backward, the cross-entropy gradient softmax − onehot, the SwiGLU / GELU MLP backward and a
// 2-D transpose (so that the GEMMs of the backward reuse Linear). Row-parallel on both backends.
// Any thread; calls sharing a Context.pool must not overlap.
#pragma once

#include "absl/status/status.h"
#include "kernels/core/context.h"
#include "kernels/core/tensor.h"

namespace mcserve::kernels {

// dx of y = x · rsqrt(mean(x²) + eps) · w, per row.
struct RmsNormBackwardArgs {
  const Tensor* x = nullptr;       // [rows, n] F32 the forward input
  const Tensor* weight = nullptr;  // [n] F32
  const Tensor* dy = nullptr;      // [rows, n] F32
  float eps = 1e-6f;
  Tensor* dx = nullptr;            // [rows, n] F32 (may alias dy)
};
absl::Status RmsNormBackward(const Context& ctx, const RmsNormBackwardArgs& args);

// grad = softmax(logits) − onehot(target), per row: ∂/∂logits of −log softmax(logits)[target].
struct XentGradArgs {
  const Tensor* logits = nullptr;   // [rows, vocab] F32
  const Tensor* targets = nullptr;  // [rows] I32 in [0, vocab)
  Tensor* grad = nullptr;           // [rows, vocab] F32 (may alias logits)
};
absl::Status XentGrad(const Context& ctx, const XentGradArgs& args);

// Backward of m = SiLU(gate) ⊙ up (gate given) or m = GELU(up) (exact erf; gate null).
struct GluBackwardArgs {
  const Tensor* gate = nullptr;  // [rows, n] F32 pre-activation, or null (GELU)
  const Tensor* up = nullptr;    // [rows, n] F32 pre-activation
  const Tensor* dm = nullptr;    // [rows, n] F32 ∂L/∂m
  Tensor* dgate = nullptr;       // [rows, n] F32 (SwiGLU only; null for GELU)
  Tensor* dup = nullptr;         // [rows, n] F32
};
absl::Status GluBackward(const Context& ctx, const GluBackwardArgs& args);

// out = xᵀ.
struct TransposeArgs {
  const Tensor* x = nullptr;  // [a, b] F32
  Tensor* out = nullptr;      // [b, a] F32 (not aliasing x)
};
absl::Status Transpose(const Context& ctx, const TransposeArgs& args);

namespace internal {
absl::Status RmsNormBackwardCpu(const Context& ctx, const RmsNormBackwardArgs& args);
absl::Status XentGradCpu(const Context& ctx, const XentGradArgs& args);
absl::Status GluBackwardCpu(const Context& ctx, const GluBackwardArgs& args);
absl::Status TransposeCpu(const Context& ctx, const TransposeArgs& args);
namespace cuda {  // cms_backward_cuda.cu compiled by nvcc
absl::Status RmsNormBackwardCuda(const Context& ctx, const RmsNormBackwardArgs& args);
absl::Status XentGradCuda(const Context& ctx, const XentGradArgs& args);
absl::Status GluBackwardCuda(const Context& ctx, const GluBackwardArgs& args);
absl::Status TransposeCuda(const Context& ctx, const TransposeArgs& args);
}  // namespace cuda
namespace cuda_emu {  // the same source on the CUDA emulator
absl::Status RmsNormBackwardCuda(const Context& ctx, const RmsNormBackwardArgs& args);
absl::Status XentGradCuda(const Context& ctx, const XentGradArgs& args);
absl::Status GluBackwardCuda(const Context& ctx, const GluBackwardArgs& args);
absl::Status TransposeCuda(const Context& ctx, const TransposeArgs& args);
}  // namespace cuda_emu
}  // namespace internal

}  // namespace mcserve::kernels
