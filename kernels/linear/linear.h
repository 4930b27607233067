// Linear: out = x · wᵀ (+ out when accumulating); the projection, MLP and logits GEMM.
// CPU: a GEMV up to 8 rows of x, our small-m GEMMs up to 64, OpenBLAS sgemm beyond (linear_cpu.cc).
// Any thread; calls sharing a Context.pool must not overlap.
#pragma once

#include <span>

#include "absl/status/status.h"
#include "kernels/core/context.h"
#include "kernels/core/tensor.h"

namespace mcserve::kernels {

struct LinearArgs {
  const Tensor* x = nullptr;  // [m, in] F32
  const Tensor* w = nullptr;  // [out, in] F32 | BF16 | F16 (PyTorch nn.Linear layout)
  Tensor* out = nullptr;      // [m, out] F32
  bool accumulate = false;    // out += x·wᵀ instead of out = x·wᵀ
};

absl::Status Linear(const Context& ctx, const LinearArgs& args);

// One weight of a LinearGroup call and the output it writes.
struct LinearGroupItem {
  const Tensor* w = nullptr;  // [out_i, in] F32 | BF16 | F16
  Tensor* out = nullptr;      // [m, out_i] F32
};

struct LinearGroupArgs {
  const Tensor* x = nullptr;               // [m, in] F32, shared by every item
  std::span<const LinearGroupItem> items;  // at least one
};

// out_i = x · w_iᵀ for every item: the projections that read the same input as one op. On the CPU
// up to m = 64 (decode batches), all items' rows go through the thread pool in one hand-off instead
// of one per weight; every result is bit-equal to a separate Linear call. Any thread; calls sharing
// a Context.pool must not overlap.
absl::Status LinearGroup(const Context& ctx, const LinearGroupArgs& args);

namespace internal {
absl::Status LinearCpu(const Context& ctx, const LinearArgs& args);
absl::Status LinearGroupCpu(const Context& ctx, const LinearGroupArgs& args);
namespace cuda {  // linear_cuda.cu compiled by nvcc
absl::Status LinearCuda(const Context& ctx, const LinearArgs& args);
}  // namespace cuda
namespace cuda_emu {  // the same source on the CUDA emulator
absl::Status LinearCuda(const Context& ctx, const LinearArgs& args);
}  // namespace cuda_emu
}  // namespace internal

}  // namespace mcserve::kernels
