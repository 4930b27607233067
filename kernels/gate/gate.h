// Gate: the per-token decay factors of the recurrent families, computed from projections.
// Any thread; calls sharing a Context.pool must not overlap.
#pragma once

#include "absl/status/status.h"
#include "kernels/core/context.h"
#include "kernels/core/tensor.h"

namespace mcserve::kernels {

enum class GateKind {
  // GDN / SWLA: α = exp(−exp(A_log[h]) · softplus(x[t,h] + dt_bias[h]))    (x: [T, H])
  kSoftplusDecay,
  // GLA: α = exp(max(logsigmoid(x) / normalizer, clamp_min))                (x: [T, D])
  kLogSigmoidDecay,
};

struct GateArgs {
  GateKind kind = GateKind::kSoftplusDecay;
  const Tensor* x = nullptr;        // [T, H] or [T, D] F32 (projection output)
  const Tensor* a_log = nullptr;    // kSoftplusDecay: [H] F32 | BF16 | F16
  const Tensor* dt_bias = nullptr;  // kSoftplusDecay: [H]
  float normalizer = 16.0f;         // kLogSigmoidDecay
  bool has_clamp_min = false;       // kLogSigmoidDecay: clamp the log-decay from below
  float clamp_min = 0.0f;
  Tensor* out = nullptr;            // same shape as x, F32: the multiplicative decay α ∈ (0, 1]
};

absl::Status Gate(const Context& ctx, const GateArgs& args);

namespace internal {
absl::Status GateCpu(const Context& ctx, const GateArgs& args);
namespace cuda {  // gate_cuda.cu compiled by nvcc
absl::Status GateCuda(const Context& ctx, const GateArgs& args);
}  // namespace cuda
namespace cuda_emu {  // the same source on the CUDA emulator
absl::Status GateCuda(const Context& ctx, const GateArgs& args);
}  // namespace cuda_emu
}  // namespace internal

}  // namespace mcserve::kernels
