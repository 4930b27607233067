// Attention: causal softmax attention over a per-slot KV cache, for a varlen batch (ARMT's GPT-2
// blocks: full causal attention inside the open segment, whose K and V the slot's cache holds).
// Sequence b owns rows [cu[b], cu[b+1]) (n_b rows) and state slot s_b = slot_ids[b]; c_b = cached[b]
// positions of the slot's cache are already filled. Per sequence, first the append
//   k_cache[s_b, c_b + j] = k[cu[b] + j],  v_cache[s_b, c_b + j] = v[cu[b] + j]   (j < n_b)
// (c_b + n_b ≤ capacity), then per row j and query head h (kv head g = h / (Hq / Hkv)), with
// p = c_b + j and K_s = k_cache[s_b, s, g], V_s = v_cache[s_b, s, g]:
//   z_s = scale · ⟨q[cu[b] + j, h], K_s⟩  (s = 0 .. p),  m = max_s z_s,  w_s = exp(z_s − m),
//   out[cu[b] + j, h] = (Σ_s w_s V_s) / (Σ_s w_s).
// Prefill chunks (n > 1), one-token decode (n = 1) and empty sequences (n = 0: nothing happens) mix
// in one call. The caller owns `cached` (advance it by n_b after the call; reset it at a segment
// boundary). Any thread; calls sharing a Context.pool must not overlap.
#pragma once

#include <cmath>
#include <optional>

#include "absl/status/status.h"
#include "kernels/core/batch_layout.h"
#include "kernels/core/context.h"
#include "kernels/core/tensor.h"

namespace mcserve::kernels {

// Largest head dimension dh the op accepts.
inline constexpr int64_t kAttentionMaxHeadDim = 128;

// One call's tensors (all on ctx.device) and its scale; see the header comment for the math.
struct AttentionArgs {
  const Tensor* q = nullptr;       // [T, Hq, dh] F32, Hq a multiple of Hkv, 1 ≤ dh ≤ 128
  const Tensor* k = nullptr;       // [T, Hkv, dh] F32, appended to k_cache
  const Tensor* v = nullptr;       // [T, Hkv, dh] F32, appended to v_cache
  std::optional<float> scale;      // logit scale, finite and > 0; unset: 1/sqrt(dh)
  const Tensor* cached = nullptr;  // [B] I32: positions already in each sequence's slot cache
  BatchLayout layout;
  Tensor* k_cache = nullptr;       // [num_slots, capacity, Hkv, dh] F32, in/out
  Tensor* v_cache = nullptr;       // [num_slots, capacity, Hkv, dh] F32, in/out
  Tensor* out = nullptr;           // [T, Hq, dh] F32 (must not overlap an input or a cache)
};

// The logit scale of a call: args.scale, or 1/sqrt(dh) for q [T, Hq, dh] when unset.
inline float AttentionScale(const AttentionArgs& args) {
  return args.scale.value_or(1.0f / std::sqrt(static_cast<float>(args.q->dim(2))));
}

// Appends every sequence's k, v to its slot's cache and writes its causal attention output.
absl::Status Attention(const Context& ctx, const AttentionArgs& args);

namespace internal {
absl::Status AttentionCpu(const Context& ctx, const AttentionArgs& args);
namespace cuda {  // attention_cuda.cu compiled by nvcc
absl::Status AttentionCuda(const Context& ctx, const AttentionArgs& args);
}  // namespace cuda
namespace cuda_emu {  // the same source on the CUDA emulator
absl::Status AttentionCuda(const Context& ctx, const AttentionArgs& args);
}  // namespace cuda_emu
}  // namespace internal

}  // namespace mcserve::kernels
