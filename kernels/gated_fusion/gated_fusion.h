// GatedFusion: GAM's fusion of the local (conv) and global (memory-bank) pathways,
//   out = sigmoid(g[:, :D] + b[:D]) ⊙ local + sigmoid(g[:, D:] + b[D:]) ⊙ global
// where g = W_g u is the gate projection [T, 2D] (first half local, second global). Any thread;
// calls sharing a Context.pool must not overlap.
#pragma once

#include "absl/status/status.h"
#include "kernels/core/context.h"
#include "kernels/core/tensor.h"

namespace mcserve::kernels {

struct GatedFusionArgs {
  const Tensor* gate = nullptr;       // [T, 2D] F32, before the bias and sigmoid
  const Tensor* gate_bias = nullptr;  // optional [2D] F32
  const Tensor* local = nullptr;      // [T, D] F32
  const Tensor* global = nullptr;     // [T, D] F32
  Tensor* out = nullptr;              // [T, D] F32 (may alias local or global)
};

absl::Status GatedFusion(const Context& ctx, const GatedFusionArgs& args);

namespace internal {
absl::Status GatedFusionCpu(const Context& ctx, const GatedFusionArgs& args);
namespace cuda {  // gated_fusion_cuda.cu compiled by nvcc
absl::Status GatedFusionCuda(const Context& ctx, const GatedFusionArgs& args);
}  // namespace cuda
namespace cuda_emu {  // the same source on the CUDA emulator
absl::Status GatedFusionCuda(const Context& ctx, const GatedFusionArgs& args);
}  // namespace cuda_emu
}  // namespace internal

}  // namespace mcserve::kernels
