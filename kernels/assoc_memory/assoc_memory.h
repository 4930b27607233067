// AssocMemory: ARMT's per-layer associative memory (docs/model-format.md, `armt`), for a varlen batch
// whose sequence b owns rows [cu[b], cu[b+1]) and state slot s = slot_ids[b]. A slot's memory is
// A [F, D] (key-first) and z [F]; φ(·) rows (DPFP-3, kernels/feature_map) are given.
//   AssocRead:   h[r] += (fq[r] · A_s) / (fq[r] · z_s + eps)                        (every row r of b)
//   AssocWrite:  for the rows i of b (the segment's M memory-token outputs), from the OLD A_s, z_s:
//                  first[b]: vbar_i = 0, γ_i = 1
//                  else:     d_i = fk_i · z_s + eps,  vbar_i = (fk_i · A_s) / d_i,
//                            γ_i = clip(1 − d_i / (|fk_i|² + eps), 0, 1)   (1 when !correction)
//                  delta_i = β_i (vn_i − vbar_i);  then  A_s += Σ_i fk_iᵀ delta_i,  z_s += Σ_i γ_i fk_i
//                (the parallel form: every vbar_i, γ_i from the state before the write; sums in row order).
// Any thread; calls sharing a Context.pool must not overlap.
#pragma once

#include "absl/status/status.h"
#include "kernels/core/batch_layout.h"
#include "kernels/core/context.h"
#include "kernels/core/tensor.h"

namespace mcserve::kernels {

// ARMT's memory eps (read and recall denominators, γ's denominator).
inline constexpr float kAssocMemoryEps = 1e-5f;

struct AssocReadArgs {
  const Tensor* fq = nullptr;  // [T, F] F32: φ(W_Q h) per row
  BatchLayout layout;
  const Tensor* a = nullptr;   // [num_slots, F, D] F32
  const Tensor* z = nullptr;   // [num_slots, F] F32
  float eps = kAssocMemoryEps;
  Tensor* h = nullptr;         // [T, D] F32, in/out (the residual stream)
};

// h += the associative read of every row (see the header comment).
absl::Status AssocRead(const Context& ctx, const AssocReadArgs& args);

struct AssocWriteArgs {
  const Tensor* fk = nullptr;     // [T, F] F32: φ(W_K o) of the memory-token outputs
  const Tensor* vn = nullptr;     // [T, D] F32: W_V o
  const Tensor* beta = nullptr;   // [T] F32: sigmoid(w_b · o + b_b)
  const Tensor* first = nullptr;  // [B] I32: 1 for a slot's first write (γ 1, vbar 0), else 0
  bool correction = true;         // γ-correction (false: γ = 1)
  float eps = kAssocMemoryEps;
  BatchLayout layout;
  Tensor* delta = nullptr;        // [T, D] F32 out: β_i (vn_i − vbar_i)
  Tensor* gamma = nullptr;        // [T] F32 out: γ_i
  Tensor* a = nullptr;            // [num_slots, F, D] F32, in/out
  Tensor* z = nullptr;            // [num_slots, F] F32, in/out
};

// Writes every sequence's rows into its slot's memory (see the header comment).
absl::Status AssocWrite(const Context& ctx, const AssocWriteArgs& args);

namespace internal {
absl::Status AssocReadCpu(const Context& ctx, const AssocReadArgs& args);
absl::Status AssocWriteCpu(const Context& ctx, const AssocWriteArgs& args);
namespace cuda {  // assoc_memory_cuda.cu compiled by nvcc
absl::Status AssocReadCuda(const Context& ctx, const AssocReadArgs& args);
absl::Status AssocWriteCuda(const Context& ctx, const AssocWriteArgs& args);
}  // namespace cuda
namespace cuda_emu {  // the same source on the CUDA emulator
absl::Status AssocReadCuda(const Context& ctx, const AssocReadArgs& args);
absl::Status AssocWriteCuda(const Context& ctx, const AssocWriteArgs& args);
}  // namespace cuda_emu
}  // namespace internal

}  // namespace mcserve::kernels
