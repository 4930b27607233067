// GatherRows: out[i] = table[ids[i]], widened to F32 — the embedding lookup (a table of token
// embeddings, token ids) and any other gather of rows by index (each sequence's last row, a slot's
// rows). Any thread; calls sharing a Context.pool must not overlap.
#pragma once

#include "absl/status/status.h"
#include "kernels/core/context.h"
#include "kernels/core/tensor.h"

namespace mcserve::kernels {

struct GatherRowsArgs {
  const Tensor* table = nullptr;  // [n, H] F32 | BF16 | F16: the rows to gather from
  const Tensor* ids = nullptr;    // [m] I32 row indices; each in [0, n) or the op fails with InvalidArgument
  Tensor* out = nullptr;          // [m, H] F32
};

absl::Status GatherRows(const Context& ctx, const GatherRowsArgs& args);

namespace internal {
absl::Status GatherRowsCpu(const Context& ctx, const GatherRowsArgs& args);
namespace cuda {  // embedding_cuda.cu compiled by nvcc
absl::Status GatherRowsCuda(const Context& ctx, const GatherRowsArgs& args);
}  // namespace cuda
namespace cuda_emu {  // the same source on the CUDA emulator
absl::Status GatherRowsCuda(const Context& ctx, const GatherRowsArgs& args);
}  // namespace cuda_emu
}  // namespace internal

}  // namespace mcserve::kernels
