// HopeMemWrite: the second half of HOPE's scan (hope_memory.h) — M_mem alone, per sequence and head,
// token by token, from the features HopeFeatures wrote: the anchor refresh at (t−1) mod C_mem = 0 (t
// from phase, the request's position), the read-out (before the write, after it, or at the anchor, as
// the options say), v̂ = M_mem(v; anchor), the gradient at the anchor and the DGD + retention update
// (+ momentum): steps 1, 5–7 of hope_memory.h for M_mem. Memory Caching runs it over the rows of a
// segment piece, restarting or caching "memory" between calls.
// Any thread; calls sharing a Context.pool must not overlap.
#pragma once

#include "absl/status/status.h"
#include "kernels/core/batch_layout.h"
#include "kernels/core/context.h"
#include "kernels/core/tensor.h"
#include "kernels/hope_memory/hope_memory.h"

namespace mcserve::kernels {

// The token at row cu[i] + j has 1-based position t = phase[i] + j + 1 (phase reducible modulo any
// multiple of C_mem). Slots at a memory's start hold the learned initial weights in memory and
// mem_anchor and zero momentum.
struct HopeMemWriteArgs {
  HopeMemoryOptions options;
  const Tensor* q = nullptr;            // [T, H, d] F32 read-out query (HopeFeatures' q)
  const Tensor* k = nullptr;            // [T, H, d] F32 key
  const Tensor* v = nullptr;            // [T, H, d] F32 value
  const Tensor* alpha = nullptr;        // [T, H] F32 retention
  const Tensor* eta = nullptr;          // [T, H] F32 learning rate
  const Tensor* beta = nullptr;         // [T, H] F32 momentum gate (kData only, else null)
  const Tensor* phase = nullptr;        // [B] I32 ≥ 0
  BatchLayout layout;                   // sequence i: rows [cu[i], cu[i+1]), slot slot_ids[i]
  Tensor* memory = nullptr;             // [num_slots, H, Pm] F32 running weights, in/out
  Tensor* mem_anchor = nullptr;         // [num_slots, H, Pm] F32, in/out
  Tensor* momentum = nullptr;           // [num_slots, H, Pm] F32 (momentum only, else null)
  Tensor* read_weights = nullptr;       // optional [num_slots, H, Pm] F32 out: the weights the slot's last
                                        // row read (W before / after its write, or the anchor)
  Tensor* out = nullptr;                // [T, H, d] F32: y
};

// Runs M_mem's half on ctx.device (CUDA: the shared-memory limit of HopeMemory).
absl::Status HopeMemWrite(const Context& ctx, const HopeMemWriteArgs& args);

namespace internal {
absl::Status HopeMemWriteCpu(const Context& ctx, const HopeMemWriteArgs& args);
namespace cuda {
absl::Status HopeMemWriteCuda(const Context& ctx, const HopeMemWriteArgs& args);
}  // namespace cuda
namespace cuda_emu {
absl::Status HopeMemWriteCuda(const Context& ctx, const HopeMemWriteArgs& args);
}  // namespace cuda_emu
}  // namespace internal

}  // namespace mcserve::kernels
