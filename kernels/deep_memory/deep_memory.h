// Deep (MLP) memories, spec B.2.3–B.2.5: per head M(x) = x + N(W1·GELU(W2·x)) with d = head dim,
// e = expansion·d, W2 [e, d] applied first, W1 [d, e], exact erf GELU, no biases, and N the identity
// or a layer norm over the d outputs with slow affine gain/bias (biased variance).
//
// State, one F32 tensor per kind, [num_slots, H, P] with P = 2·e·d per head: W2 row-major [e, d],
// then W1 row-major [d, e] (deep_memory_math.h). Titans momentum and the inner-chunk anchor have the
// same layout. A cached checkpoint (DeepMcPage) is one [H, P] tensor of weights only.
#pragma once

#include "absl/status/status.h"
#include "kernels/core/batch_layout.h"
#include "kernels/core/context.h"
#include "kernels/core/tensor.h"

namespace mcserve::kernels {

enum class DeepMemoryRule {
  // DLA (B.2.4): θ ← θ + η·G with G = ∇θ⟨M(k), v⟩ (Hebbian).
  kDla,
  // Titans (B.2.5): G = ∇θ ½‖M(k) − v‖²; S ← β·S − η·G; θ ← α·θ + S.
  kTitans,
};

// One call: for each sequence of the layout and each head, its tokens in order. Before a token whose
// index inside its inner chunk is 0 (b > 1) the anchor is set to the current weights; the token's
// gradient is taken at the anchor (b = 1: at the current weights); the weights are updated; then
// o_t = M_θt(q_t) is read with the updated weights. The token at row cu_seqlens[i] + j of sequence i
// has inner-chunk index (inner_offset[i] + j) mod b.
struct DeepMemoryArgs {
  DeepMemoryRule rule = DeepMemoryRule::kDla;
  int expansion = 4;                     // e = expansion·d
  int inner_chunk_size = 1;              // b ≥ 1
  float ln_eps = 1e-5f;                  // layer norm ε (when ln_weight is given)
  const Tensor* q = nullptr;             // [T, H, d] F32, already normalised
  const Tensor* k = nullptr;             // [T, H, d] F32
  const Tensor* v = nullptr;             // [T, H, d] F32
  const Tensor* step = nullptr;          // [T, H] F32: η
  const Tensor* retention = nullptr;     // kTitans: [T, H] F32 α (else null)
  const Tensor* momentum_gate = nullptr; // kTitans: [T, H] F32 β (else null)
  const Tensor* ln_weight = nullptr;     // optional [H, d] F32 gain g of N (with ln_bias; null: N = identity)
  const Tensor* ln_bias = nullptr;       // optional [H, d] F32 bias b of N
  const Tensor* inner_offset = nullptr;  // [B] I32, each in [0, b): inner-chunk index of the sequence's
                                         // first token; required when b > 1, ignored (may be null) when b = 1
  BatchLayout layout;                    // sequence i: rows [cu[i], cu[i+1]), state slot slot_ids[i]
  Tensor* memory = nullptr;              // [num_slots, H, P] F32 weights θ, in/out
  Tensor* momentum = nullptr;            // kTitans: [num_slots, H, P] F32 S, in/out (else null)
  Tensor* anchor = nullptr;              // b > 1: [num_slots, H, P] F32 anchor weights, in/out (else null)
  Tensor* out = nullptr;                 // [T, H, d] F32: o_t
};

// Runs the update-then-read scan above on ctx.device.
// Any thread; calls sharing a Context.pool must not overlap.
absl::Status DeepMemory(const Context& ctx, const DeepMemoryArgs& args);

// Adds memory[s] into sum[s] for each slot s of slot_ids: the running sum of checkpoint weights that
// the post-training mean (B.5.6) reads as a DeepMcPage with weight_scale = 1/count.
struct DeepMemoryAccumulateArgs {
  const Tensor* memory = nullptr;    // [num_slots, H, P] F32: weights to add (e.g. the online memory)
  const Tensor* slot_ids = nullptr;  // [B] I32, distinct, each in [0, num_slots)
  Tensor* sum = nullptr;             // [num_slots, H, P] F32, in/out
};

// sum[slot_ids[i]] += memory[slot_ids[i]] for every i, on ctx.device.
// Any thread; calls sharing a Context.pool must not overlap.
absl::Status DeepMemoryAccumulate(const Context& ctx, const DeepMemoryAccumulateArgs& args);

namespace internal {
absl::Status DeepMemoryCpu(const Context& ctx, const DeepMemoryArgs& args);
absl::Status DeepMemoryAccumulateCpu(const Context& ctx, const DeepMemoryAccumulateArgs& args);
namespace cuda {  // deep_memory_cuda.cu compiled by nvcc
absl::Status DeepMemoryCuda(const Context& ctx, const DeepMemoryArgs& args);
absl::Status DeepMemoryAccumulateCuda(const Context& ctx, const DeepMemoryAccumulateArgs& args);
}  // namespace cuda
namespace cuda_emu {  // the same source on the CUDA emulator
absl::Status DeepMemoryCuda(const Context& ctx, const DeepMemoryArgs& args);
absl::Status DeepMemoryAccumulateCuda(const Context& ctx, const DeepMemoryAccumulateArgs& args);
}  // namespace cuda_emu
}  // namespace internal

}  // namespace mcserve::kernels
