// DeepMcReadout: Memory Caching's aggregation for deep (MLP) memories (spec B.5.1–B.5.4, B.6.1), the
// analogue of McReadout with the same page / per-token CSR conventions. For token t and head h, with
// M_i(q) = q + N(c_i·W1_i·σ(c_i·W2_i·q)) (σ = exact GELU, or SiLU with activation kSilu: HOPE's M_mem) the read-out of page i (c_i its weight_scale) and o_on the
// online memory's read-out (DeepMemory's out):
//   kSum:         y = online_weight·o_on + cached_weight·Σ_i M_i(q)   (Residual: every M_i(q) keeps its
//                 own q skip, no renormalisation, B.9 #26; with one page holding the running sum of
//                 checkpoints and weight_scale = 1/count, the post-training mean y = M_on(q) + M̄(q))
//   kSoftmax:     γ = softmax(⟨u, pool_i⟩ …, ⟨u, online_pool⟩), y = γ_on·o_on + Σ γ_i·M_i(q)     (GRM)
//   kTopKSoftmax: keep the top_k pages by ⟨u, pool_i⟩ (ties: lower list position), then as kSoftmax (SSC)
//   kSoup:        γ as kSoftmax over the pages and the online memory's weights θ_on (B.5.3, activation
//                 mixing, souped weights never materialised): z* = Σ γ_i c_i W2_i q (θ_on included, c = 1),
//                 h* = σ(z*), y = q + N(Σ γ_i c_i W1_i h*). With online given, a token that reads no
//                 page keeps o_on exactly (y = online), as every other kind.
// kSoup reads θ_on from online_memory at the slot of the token's sequence as it is when the op runs:
// exact for decode (one token per sequence, after DeepMemory's update); in a prefill chunk every
// token of a sequence would see the chunk's final weights, so soup prefill runs token by token.
// Inputs a kind does not read are ignored, as in McReadout (u, online_pool for kSum; online_memory and
// layout for all but kSoup); online is optional for kSoup.
// Any thread; calls sharing a Context.pool must not overlap.
#pragma once

#include <span>

#include "absl/status/status.h"
#include "kernels/core/batch_layout.h"
#include "kernels/core/context.h"
#include "kernels/core/tensor.h"

namespace mcserve::kernels {

enum class DeepMcCombine { kSum, kSoftmax, kTopKSoftmax, kSoup };
enum class DeepMcActivation { kGelu, kSilu };  // σ of the memories' hidden layer

// One frozen deep memory: a checkpoint of one layer for one segment (or a running sum of them).
struct DeepMcPage {
  const Tensor* memory = nullptr;      // [H, P] F32 weights (W2 [e, d] then W1 [d, e] per head)
  const Tensor* pooled_key = nullptr;  // [H, d] F32 (kSoftmax, kTopKSoftmax, kSoup)
  float weight_scale = 1.0f;           // c: the page's weights are c·W (1/count for a running sum)
};

struct DeepMcReadoutArgs {
  DeepMcCombine combine = DeepMcCombine::kSoftmax;
  DeepMcActivation activation = DeepMcActivation::kGelu;
  int expansion = 4;                      // e = expansion·d
  int top_k = 2;                          // kTopKSoftmax
  float online_weight = 1.0f;             // kSum
  float cached_weight = 1.0f;             // kSum
  float ln_eps = 1e-5f;                   // layer norm ε (when ln_weight is given)
  const Tensor* ln_weight = nullptr;      // optional [H, d] F32 gain of N (with ln_bias; null: identity)
  const Tensor* ln_bias = nullptr;        // optional [H, d] F32 bias of N
  const Tensor* q = nullptr;              // [T, H, d] F32: read-out query
  const Tensor* u = nullptr;              // [T, H, d] F32: gate input (all kinds but kSum)
  const Tensor* online_pool = nullptr;    // [T, H, d] F32: pool of the open segment up to t (all but kSum)
  const Tensor* online = nullptr;         // [T, H, d] F32: o_on (all kinds; optional for kSoup)
  const Tensor* online_memory = nullptr;  // kSoup: [num_slots, H, P] F32 online weights θ_on
  BatchLayout layout;                     // kSoup: token rows → sequences → slots of online_memory
  std::span<const DeepMcPage> pages;      // every page any token reads
  const Tensor* token_page_offsets = nullptr;  // [T + 1] I32, CSR offsets into token_pages
  const Tensor* token_pages = nullptr;         // [E] I32, indices into `pages`; token t reads
                                               // token_pages[offsets[t] .. offsets[t+1])
  Tensor* out = nullptr;                  // [T, H, d] F32 (may alias online, kSoup too)
};

// Computes out for every token and head on ctx.device. Any thread; calls sharing a Context.pool must not overlap.
absl::Status DeepMcReadout(const Context& ctx, const DeepMcReadoutArgs& args);

namespace internal {
absl::Status DeepMcReadoutCpu(const Context& ctx, const DeepMcReadoutArgs& args);
namespace cuda {  // deep_mc_readout_cuda.cu compiled by nvcc
absl::Status DeepMcReadoutCuda(const Context& ctx, const DeepMcReadoutArgs& args);
}  // namespace cuda
namespace cuda_emu {  // the same source on the CUDA emulator
absl::Status DeepMcReadoutCuda(const Context& ctx, const DeepMcReadoutArgs& args);
}  // namespace cuda_emu
}  // namespace internal

}  // namespace mcserve::kernels
