// McReadout: Memory Caching's aggregation of a linear memory's online read-out with the read-outs
// of cached checkpoints (docs/memory-caching.md). For token t and state head h:
//   o_i = S_iᵀ q_t for each cached page i the token reads (its explicit list), o_on given;
//   kSum:         y = online_weight·o_on + cached_weight·Σ_i o_i          (residual, post-training mean)
//   kSoftmax:     γ = softmax(⟨u,pool_i⟩ …, ⟨u,pool_on⟩), y = γ_on·o_on + Σ γ_i·o_i      (GRM, soup)
//   kTopKSoftmax: keep the top_k pages by ⟨u,pool_i⟩ (ties: lower list position), then as kSoftmax (SSC)
// Pages are only read, never copied; the list per token is explicit so that the serving engine can
// hand SSC only the pages it staged. Any thread; calls sharing a Context.pool must not overlap.
#pragma once

#include <span>

#include "absl/status/status.h"
#include "kernels/core/context.h"
#include "kernels/core/tensor.h"

namespace mcserve::kernels {

enum class McCombine { kSum, kSoftmax, kTopKSoftmax };

// One frozen memory: a checkpoint of one layer for one segment.
struct McPage {
  const Tensor* memory = nullptr;      // [Hs, K, V] F32
  const Tensor* pooled_key = nullptr;  // [Hs, K] F32 (kSoftmax / kTopKSoftmax)
};

struct McReadoutArgs {
  McCombine combine = McCombine::kSoftmax;
  int top_k = 2;                        // kTopKSoftmax
  float online_weight = 1.0f;           // kSum
  float cached_weight = 1.0f;           // kSum
  const Tensor* q = nullptr;            // [T, Hs, K] F32: read-out query per state head
  const Tensor* u = nullptr;            // [T, Hs, K] F32: gate input (kSoftmax / kTopKSoftmax)
  const Tensor* online_pool = nullptr;  // [T, Hs, K] F32: pool of the open segment up to t (softmax kinds)
  const Tensor* online = nullptr;       // [T, Hs, V] F32: o_on, the online memory's read-out
  std::span<const McPage> pages;        // every page any token reads
  const Tensor* token_page_offsets = nullptr;  // [T + 1] I32, CSR offsets into token_pages
  const Tensor* token_pages = nullptr;         // [P] I32, indices into `pages`; token t reads
                                               // token_pages[offsets[t] .. offsets[t+1])
  Tensor* out = nullptr;                // [T, Hs, V] F32 (may alias online)
};

absl::Status McReadout(const Context& ctx, const McReadoutArgs& args);

namespace internal {
absl::Status McReadoutCpu(const Context& ctx, const McReadoutArgs& args);
namespace cuda {  // mc_readout_cuda.cu compiled by nvcc
absl::Status McReadoutCuda(const Context& ctx, const McReadoutArgs& args);
}  // namespace cuda
namespace cuda_emu {  // the same source on the CUDA emulator
absl::Status McReadoutCuda(const Context& ctx, const McReadoutArgs& args);
}  // namespace cuda_emu
}  // namespace internal

}  // namespace mcserve::kernels
