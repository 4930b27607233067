// HopeMemory: HOPE's self-modifying Titans memory scan (docs/model-format.md, `hope`) over a varlen
// batch whose per-request state lives in state slots. Per layer and head every memory □ ∈ {k, v, eta,
// alpha, (q), mem} is a 2-layer MLP M(x; W) = R(x) + W1 σ(W2 x) with fast weights that the request
// itself updates token by token (DGD with retention, optional momentum), each gradient taken at the
// memory's chunk anchor. The recurrence is non-linear across anchor refreshes, so prefill and decode
// are the same exact per-token scan; sequences and heads run in parallel.
// Any thread; calls sharing a Context.pool must not overlap.
//
// Per head, with d = head_dim, E = expansion·d and o = d (k, v, q, mem) or 1 (eta, alpha), one memory's
// weights are W2 row-major [E, d] (applied first) then W1 row-major [o, E]: 2·E·d floats (o = d) or
// E·d + E (o = 1). "memory" packs M_mem alone (the layout of kernels/deep_memory, so a Memory Caching
// page is one [H, Pm] tensor); "fast" packs k, v, eta, alpha and, with adaptive_q, q, in that order.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/core/batch_layout.h"
#include "kernels/core/context.h"
#include "kernels/core/tensor.h"

namespace mcserve::kernels {

enum class HopeActivation { kSilu, kGelu };            // σ of every memory MLP (GELU: exact erf)
enum class HopeEtaActivation { kSigmoid, kSoftplus };  // η = scale·sigmoid(η~) | scale·softplus(η~)
enum class HopeW1Rule { kRetention, kDgdHidden };      // W1 ← αW1 − ηG1 | W1(αI − η â âᵀ) − ηG1
enum class HopeMomentum { kNone, kConstant, kData };   // S ← βS − ηG; W ← decay(W) + S

// The model's choices for one layer (config fields of the same names; docs/model-format.md).
struct HopeMemoryOptions {
  int head_dim = 0;                  // d
  int expansion = 2;                 // E = expansion·d
  int conv_size = 4;                 // K ≥ 1: causal depthwise conv window of q~, k~, v~
  int chunk_size_other = 16;         // C_o ≥ 1: anchor period of k, v, eta, alpha (, q)
  int chunk_size_mem = 16;           // C_mem ≥ 1: anchor period of mem
  HopeActivation activation = HopeActivation::kSilu;
  HopeEtaActivation eta_activation = HopeEtaActivation::kSigmoid;
  float eta_scale = 1.0f;            // eta_max (sigmoid) or eta_scale (softplus)
  bool eta_clamp = true;             // η ≤ 1 + α
  HopeW1Rule w1_rule = HopeW1Rule::kRetention;
  bool read_after_write = false;     // read_index after_write: y = M_mem(q; W after the token's write)
  bool read_anchor = false;          // readout_mode A: y = M_mem(q; mem anchor)
  HopeMomentum momentum = HopeMomentum::kNone;
  float momentum_beta = 0.9f;        // β for kConstant
  float grad_scale = 2.0f;           // s: G1 = s·e aᵀ, G2 = s·((A1ᵀe) ⊙ σ'(z)) kᵀ
  bool adaptive_q = false;           // q~ = M_q(x; anchor) instead of the given q_pre
};

// Floats per head of one memory: 2·E·d (o = d) or E·d + E (o = 1).
int64_t HopeMemoryParams(const HopeMemoryOptions& o, bool scalar_output);
// Floats per head of "memory" (M_mem) and of "fast" (k, v, eta, alpha, and q with adaptive_q).
int64_t HopeMemParams(const HopeMemoryOptions& o);
int64_t HopeFastParams(const HopeMemoryOptions& o);

// One call: for each sequence i of the layout and each head, its tokens in order. The token at row
// cu_seqlens[i] + j has 1-based position t = phase[i] + j + 1 (phase[i] = tokens the sequence had
// before this call, reduced modulo any common multiple of C_o and C_mem). Per token:
//   1. if (t−1) mod C_o = 0: fast_anchor ← fast;  if (t−1) mod C_mem = 0: mem_anchor ← memory
//   2. k~, v~ = M_k, M_v(x; anchors), η~, α~ = M_eta, M_alpha(x; anchors) (scalars; R = ⟨skip, x⟩ or 0;
//      with d = 1 the reference takes R = x for them too, since o = d, and so does this kernel),
//      q~ = q_pre (or M_q(x; anchor) with adaptive_q)
//   3. per channel c (head h owns channels h·d … h·d+d−1): conv(z)_t = Σ_{j<K} w[c, 0, K−1−j]·z_{t−j}
//      over the window (conv_* holds the previous K−1 pre-conv inputs, oldest first; updated);
//      q = L2(SiLU(conv q~)), k = L2(SiLU(conv k~)), v = SiLU(conv v~), L2(x) = x/√(Σx² + 1e-6)
//   4. α = sigmoid(α~); η = scale·sigmoid(η~) or scale·softplus(η~) (torch softplus, threshold 20);
//      η ← min(η, 1 + α) with eta_clamp; β = momentum_beta, or beta[row, h] (kData: the gate itself,
//      sigmoid(beta_proj u), not its logit)
//   5. y = M_mem(q; memory) (before the write), or M_mem(q; mem_anchor) with read_anchor (read_anchor
//      wins over read_after_write, as readout_mode A does in the reference)
//   6. every memory □ with anchor A and running W: v̂ = M_□(v; A); z = A2 k, a = σ(z),
//      e = R(k) + A1 a − v̂, G1 = s·e aᵀ, G2 = s·((A1ᵀ e) ⊙ σ'(z)) kᵀ;
//      W2 ← α W2 − η (W2 k) kᵀ;  W1 ← α W1 (kRetention) or α W1 − η (W1 â) âᵀ, â = a/√(Σa² + 1e-12);
//      no momentum: W ← W − η G; momentum: S ← β S − η G, W ← W + S (S per weight, starts at 0)
//   7. with read_after_write: y = M_mem(q; memory) after the writes
//   out[row, h] = y.
// Slots at position 0 must hold the learned initial weights in memory and fast, zero momentum and zero
// conv windows (the engine restarts them); anchors are refreshed at t = 1. The CUDA kernel keeps the
// per-token vectors of a head in shared memory: (6·d + 5·E + 8) floats ≤ 48 KiB, else Unimplemented.
// A slot or phase out of range in device-resident tensors gives NaN outputs and no state writes.
struct HopeMemoryArgs {
  HopeMemoryOptions options;
  const Tensor* x = nullptr;            // [T, H, d] F32 memory input (head slices of u, or in_proj u)
  const Tensor* q_pre = nullptr;        // [T, H, d] F32 q_proj u, before the conv (null with adaptive_q)
  const Tensor* beta = nullptr;         // [T, H] F32 momentum gate (kData only, else null)
  const Tensor* skip = nullptr;         // optional [2, H, d] F32: R of eta (row 0) and alpha (row 1)
  const Tensor* q_conv = nullptr;       // [H·d, 1, K] F32
  const Tensor* k_conv = nullptr;       // [H·d, 1, K] F32
  const Tensor* v_conv = nullptr;       // [H·d, 1, K] F32
  const Tensor* phase = nullptr;        // [B] I32 ≥ 0: 0-based position of each sequence's first row
  BatchLayout layout;                   // sequence i: rows [cu[i], cu[i+1]), state slot slot_ids[i]
  Tensor* memory = nullptr;             // [num_slots, H, Pm] F32 M_mem running weights, in/out
  Tensor* mem_anchor = nullptr;         // [num_slots, H, Pm] F32, in/out
  Tensor* fast = nullptr;               // [num_slots, H, Pf] F32 running weights of k, v, eta, alpha (, q)
  Tensor* fast_anchor = nullptr;        // [num_slots, H, Pf] F32, in/out
  Tensor* momentum = nullptr;           // [num_slots, H, Pm] F32 S of mem (momentum only, else null)
  Tensor* fast_momentum = nullptr;      // [num_slots, H, Pf] F32 S of the others (momentum only)
  Tensor* conv_q = nullptr;             // [num_slots, K−1, H·d] F32 (null when K = 1)
  Tensor* conv_k = nullptr;             // [num_slots, K−1, H·d] F32 (null when K = 1)
  Tensor* conv_v = nullptr;             // [num_slots, K−1, H·d] F32 (null when K = 1)
  Tensor* out = nullptr;                // [T, H, d] F32: y
};

// Runs the scan above on ctx.device.
absl::Status HopeMemory(const Context& ctx, const HopeMemoryArgs& args);

namespace internal {
absl::Status HopeMemoryCpu(const Context& ctx, const HopeMemoryArgs& args);
namespace cuda {  // hope_memory_cuda.cu compiled by nvcc
absl::Status HopeMemoryCuda(const Context& ctx, const HopeMemoryArgs& args);
}  // namespace cuda
namespace cuda_emu {  // the same source on the CUDA emulator
absl::Status HopeMemoryCuda(const Context& ctx, const HopeMemoryArgs& args);
}  // namespace cuda_emu
}  // namespace internal

}  // namespace mcserve::kernels
