// McSegmentPool: Memory Caching's pooled key of each sequence's open segment, per token
// (docs/memory-caching.md): the mean (or sum) of the keys of the segment's tokens up to and
// including the token, per state head, with constant-size segments.
// Any thread; calls sharing a Context.pool must not overlap.
#pragma once

#include "absl/status/status.h"
#include "kernels/core/batch_layout.h"
#include "kernels/core/context.h"
#include "kernels/core/tensor.h"

namespace mcserve::kernels {

struct McSegmentPoolArgs {
  const Tensor* k = nullptr;            // [T, Hk, K] F32, keys as they enter the memory update
  BatchLayout layout;                   // sequence b owns rows cu[b]..cu[b+1] and slot slot_ids[b]
  const Tensor* first_local = nullptr;  // [B] I32: local index j ∈ [1, C] of each sequence's first row
  int64_t segment_size = 1;             // C: the running sum restarts at every row with j = 1
  bool mean = true;                     // divide by j (else the plain sum)
  Tensor* pool_sum = nullptr;           // [num_slots, Hs, K] F32: running sum of the open segment, in/out
  Tensor* out = nullptr;                // [T, Hs, K] F32: pool after each row; state head h reads
                                        // key head h / (Hs / Hk)
};

absl::Status McSegmentPool(const Context& ctx, const McSegmentPoolArgs& args);

// McLevelPool: the same for logarithmic (Fenwick) segmentation. Token n's online segment is the
// dyadic block of level p = ctz(n) ending at n; a running key sum per level (restarted when a block
// of that level starts) gives its pool: sum_p / 2^p (mean) or sum_p.
struct McLevelPoolArgs {
  const Tensor* k = nullptr;               // [T, Hk, K] F32
  BatchLayout layout;
  const Tensor* first_position = nullptr;  // [B] I32: 1-based position n of each sequence's first row
  Tensor* level_sums = nullptr;            // [num_slots, Hs, L, K] F32, in/out; positions must stay < 2^L
  bool mean = true;
  Tensor* out = nullptr;                   // [T, Hs, K] F32: pool of each row's online block
};

absl::Status McLevelPool(const Context& ctx, const McLevelPoolArgs& args);

namespace internal {
absl::Status McSegmentPoolCpu(const Context& ctx, const McSegmentPoolArgs& args);
namespace cuda {  // mc_pool_cuda.cu compiled by nvcc
absl::Status McSegmentPoolCuda(const Context& ctx, const McSegmentPoolArgs& args);
}  // namespace cuda
namespace cuda_emu {  // the same source on the CUDA emulator
absl::Status McSegmentPoolCuda(const Context& ctx, const McSegmentPoolArgs& args);
}  // namespace cuda_emu
absl::Status McLevelPoolCpu(const Context& ctx, const McLevelPoolArgs& args);
namespace cuda {  // mc_pool_cuda.cu compiled by nvcc
absl::Status McLevelPoolCuda(const Context& ctx, const McLevelPoolArgs& args);
}  // namespace cuda
namespace cuda_emu {  // the same source on the CUDA emulator
absl::Status McLevelPoolCuda(const Context& ctx, const McLevelPoolArgs& args);
}  // namespace cuda_emu
}  // namespace internal

}  // namespace mcserve::kernels
