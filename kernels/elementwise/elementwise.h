// Element-wise ops: activations, residual add, SwiGLU. Any thread; calls sharing a Context.pool must not overlap.
#pragma once

#include "absl/status/status.h"
#include "kernels/core/context.h"
#include "kernels/core/tensor.h"

namespace mcserve::kernels {

enum class ActivationKind {
  kIdentity,
  kSilu,        // x·sigmoid(x)
  kSigmoid,     // 1/(1+e^-x)
  kRelu,        // max(x, 0)
  kEluPlusOne,  // elu(x) + 1
  kGelu,        // exact (erf) GELU: x·Φ(x)
  kGeluTanh,    // tanh GELU (GPT-2's gelu_new): ½x(1 + tanh(√(2/π)(x + 0.044715x³)))
};

struct ActivationArgs {
  ActivationKind kind = ActivationKind::kIdentity;
  const Tensor* x = nullptr;  // [...] F32
  float scale = 1.0f;         // out = scale · act(x)   (e.g. 2·sigmoid for allow_neg_eigval)
  Tensor* out = nullptr;      // same shape as x, F32 (may alias x)
};
absl::Status Activation(const Context& ctx, const ActivationArgs& args);

struct AddArgs {
  const Tensor* a = nullptr;  // [...] F32
  const Tensor* b = nullptr;  // same shape, F32
  Tensor* out = nullptr;      // same shape, F32 (may alias a or b)
};
// out = a + b
absl::Status Add(const Context& ctx, const AddArgs& args);

struct SwiGluArgs {
  const Tensor* gate = nullptr;  // [m, I] F32
  const Tensor* up = nullptr;    // [m, I] F32
  Tensor* out = nullptr;         // [m, I] F32 = act(gate) · up (may alias gate or up)
  ActivationKind act = ActivationKind::kSilu;  // the gate's activation (SiLU: SwiGLU; GELU: Lattice's post-gate)
};
absl::Status SwiGlu(const Context& ctx, const SwiGluArgs& args);

namespace internal {
absl::Status ActivationCpu(const Context& ctx, const ActivationArgs& args);
// out [n] = scale · sigmoid(x) on the calling thread, as ActivationCpu computes it (the same bits):
// for ops that take a sigmoid gate inside them (DeltaDecode). x, out: [n] (may alias).
void SigmoidRangeCpu(const float* x, float scale, float* out, int64_t n);
namespace cuda {  // elementwise_cuda.cu compiled by nvcc
absl::Status ActivationCuda(const Context& ctx, const ActivationArgs& args);
}  // namespace cuda
namespace cuda_emu {  // the same source on the CUDA emulator
absl::Status ActivationCuda(const Context& ctx, const ActivationArgs& args);
}  // namespace cuda_emu
absl::Status AddCpu(const Context& ctx, const AddArgs& args);
namespace cuda {  // elementwise_cuda.cu compiled by nvcc
absl::Status AddCuda(const Context& ctx, const AddArgs& args);
}  // namespace cuda
namespace cuda_emu {  // the same source on the CUDA emulator
absl::Status AddCuda(const Context& ctx, const AddArgs& args);
}  // namespace cuda_emu
absl::Status SwiGluCpu(const Context& ctx, const SwiGluArgs& args);
namespace cuda {  // elementwise_cuda.cu compiled by nvcc
absl::Status SwiGluCuda(const Context& ctx, const SwiGluArgs& args);
}  // namespace cuda
namespace cuda_emu {  // the same source on the CUDA emulator
absl::Status SwiGluCuda(const Context& ctx, const SwiGluArgs& args);
}  // namespace cuda_emu
}  // namespace internal

}  // namespace mcserve::kernels
