// Embedding: gathers rows of an embedding table by token id. Any thread; calls sharing a Context.pool must not overlap.
#pragma once

#include "absl/status/status.h"
#include "kernels/core/context.h"
#include "kernels/core/tensor.h"

namespace mcserve::kernels {

struct EmbeddingArgs {
  const Tensor* table = nullptr;  // [vocab, H] F32 | BF16 | F16
  const Tensor* ids = nullptr;    // [m] I32; each in [0, vocab) or the op fails with InvalidArgument
  Tensor* out = nullptr;          // [m, H] F32
};

absl::Status Embedding(const Context& ctx, const EmbeddingArgs& args);

namespace internal {
absl::Status EmbeddingCpu(const Context& ctx, const EmbeddingArgs& args);
namespace cuda {  // embedding_cuda.cu compiled by nvcc
absl::Status EmbeddingCuda(const Context& ctx, const EmbeddingArgs& args);
}  // namespace cuda
namespace cuda_emu {  // the same source on the CUDA emulator
absl::Status EmbeddingCuda(const Context& ctx, const EmbeddingArgs& args);
}  // namespace cuda_emu
}  // namespace internal

}  // namespace mcserve::kernels
