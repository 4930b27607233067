// Per-thread scratch memory for CPU kernels: grown to the largest size asked and kept, so the steady
// state of a decode step allocates nothing. Three independent buffers per thread: one for a loop body
// (a ParallelFor chunk), one for an op's own inputs prepared before its loop (the calling thread runs
// chunks of that loop too), and one for the inputs a projection prepares (below).
#pragma once

#include <cstddef>
#include <span>

namespace mcserve::kernels::cpu {

// `n` zeroed floats for a ParallelFor loop body, owned by the calling thread and valid until its next
// ThreadScratch call (one call per body: split one buffer when a body needs several). Any thread.
std::span<float> ThreadScratch(size_t n);

// `n` zeroed floats for an op's inputs prepared on the calling thread before its loop (widened or
// transposed weights), valid until the thread's next OpScratch call. Any thread.
std::span<float> OpScratch(size_t n);
// OpScratch without the zeroing, for a caller that writes every element before reading any (the
// GEMM's transposed x: zeroing it cost as much as the transpose). NaN-filled instead under
// MCSERVE_POISON_FOR_OVERWRITE=1 (every unit test), so a read before the write shows. Any thread.
std::span<float> OpScratchForOverwrite(size_t n);

// `n` floats for the x a projection (Linear's GEMV and small-m GEMMs) prepares once per call in its
// kernel's layout, which every thread of its loop reads; valid until the thread's next call. The
// ForOverwrite form is not zeroed (NaN-filled under MCSERVE_POISON_FOR_OVERWRITE=1). Kept apart from
// OpScratch: every projection rewrites it and the workers' reads leave its lines in their caches, and a
// serial op that next wrote the same lines (a decode token's conv taps) ran slower, likely for an
// invalidation per line on the other core. Apart, the serial time between a BF16 batch-1 token's loops
// fell 8-15% on an AMD Zen 4 VM (bench/README.md). Any thread.
std::span<float> ProjectionInputScratch(size_t n);
std::span<float> ProjectionInputScratchForOverwrite(size_t n);

// Hands out consecutive pieces of one scratch span.
class ScratchCarver {
 public:
  explicit ScratchCarver(std::span<float> all) : all_(all) {}
  // The next `n` floats.
  std::span<float> Take(size_t n) {
    std::span<float> piece = all_.subspan(at_, n);
    at_ += n;
    return piece;
  }

 private:
  std::span<float> all_;
  size_t at_ = 0;
};

}  // namespace mcserve::kernels::cpu
