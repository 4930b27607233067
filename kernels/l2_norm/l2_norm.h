// Row normalisation of q/k vectors: L2 (x / sqrt(Σx² + eps), fla's l2norm) or
// sum (x / (Σx + eps), fla's sum_norm). Optionally scales the result.
// Any thread; calls sharing a Context.pool must not overlap.
#pragma once

#include "absl/status/status.h"
#include "kernels/core/context.h"
#include "kernels/core/tensor.h"

namespace mcserve::kernels {

enum class RowNormKind { kL2, kSum };

struct L2NormArgs {
  RowNormKind kind = RowNormKind::kL2;
  const Tensor* x = nullptr;  // [rows, n] F32
  float eps = 1e-6f;          // kL2: inside the sqrt (fla: 1e-6); kSum: added to the sum (fla: 1e-4)
  float scale = 1.0f;         // multiplies the normalised row (e.g. head_k^-0.5 for q)
  Tensor* out = nullptr;      // [rows, n] F32 (may alias x)
};

absl::Status L2Norm(const Context& ctx, const L2NormArgs& args);

namespace internal {
absl::Status L2NormCpu(const Context& ctx, const L2NormArgs& args);
namespace cuda {  // l2_norm_cuda.cu compiled by nvcc
absl::Status L2NormCuda(const Context& ctx, const L2NormArgs& args);
}  // namespace cuda
namespace cuda_emu {  // the same source on the CUDA emulator
absl::Status L2NormCuda(const Context& ctx, const L2NormArgs& args);
}  // namespace cuda_emu
}  // namespace internal

}  // namespace mcserve::kernels
