// LinearMemory: the recurrent update and read-out of every matrix-memory family, over a varlen
// batch whose per-sequence memory lives in a state slot. State stays fp32, layout [K, V] per head
// ("K-first"), read after the token's write: o_t = S_tᵀ q_t.
// Any thread; calls sharing a Context.pool must not overlap.
//
// Heads: the state has Hs = max(Hq, Hk, Hv) heads; each of Hq, Hk, Hv divides Hs, and state head h
// reads q head h / (Hs / Hq), k head h / (Hs / Hk), v head h / (Hs / Hv) (fla's GQA and GVA).
#pragma once

#include "absl/status/status.h"
#include "kernels/core/batch_layout.h"
#include "kernels/core/context.h"
#include "kernels/core/tensor.h"

namespace mcserve::kernels {

enum class LinearMemoryRule {
  // Linear attention / GLA: S = Diag(α) S + k vᵀ   (α per key channel from key_decay, else 1).
  // normalize: z += k (aux), o = Sᵀq / (q·z + 1e-10).
  kAdditive,
  // DeltaNet / gated DeltaNet: S = α S; S += k (β (v − Sᵀk))ᵀ   (α from decay, else 1).
  kGatedDelta,
  // SWLA (c = 2): S = α S + β k_{t−1} v_{t−1}ᵀ + λ k_t v_tᵀ; aux holds (k_{t−1}, v_{t−1}).
  kSwla,
  // Titans, linear memory: G = k (Sᵀk − v)ᵀ; M' = η M' − θ G (aux = momentum M'); S = α S + M'.
  kTitans,
};

struct LinearMemoryArgs {
  LinearMemoryRule rule = LinearMemoryRule::kAdditive;
  const Tensor* q = nullptr;          // [T, Hq, K] F32, already feature-mapped / normalised / scaled
  const Tensor* k = nullptr;          // [T, Hk, K] F32
  const Tensor* v = nullptr;          // [T, Hv, V] F32
  const Tensor* key_decay = nullptr;  // kAdditive (GLA), optional: [T, Hk, K] α per key channel
  const Tensor* decay = nullptr;      // kGatedDelta (optional), kSwla, kTitans: [T, Hs] α
  const Tensor* beta = nullptr;       // kGatedDelta: [T, Hs] β; kSwla: β; kTitans: θ (step size)
  const Tensor* gamma = nullptr;      // kSwla: [T, Hs] λ; kTitans: [T, Hs] η (momentum)
  bool normalize = false;             // kAdditive only
  BatchLayout layout;
  Tensor* state = nullptr;            // [num_slots, Hs, K, V] F32, in/out
  Tensor* aux = nullptr;              // kAdditive+normalize: [num_slots, Hs, K] (z);
                                      // kSwla: [num_slots, Hs, K + V] (previous k, v);
                                      // kTitans: [num_slots, Hs, K, V] (momentum); else null
  Tensor* out = nullptr;              // [T, Hs, V] F32
};

absl::Status LinearMemory(const Context& ctx, const LinearMemoryArgs& args);

// LinearMemory's checks of args (rule, device, dtypes, shapes, batch layout), for ops that run the
// memory inside them (DeltaDecode). Any thread.
absl::Status ValidateLinearMemory(const Context& ctx, const LinearMemoryArgs& args);

namespace internal {
absl::Status LinearMemoryCpu(const Context& ctx, const LinearMemoryArgs& args);
namespace cuda {  // linear_memory_cuda.cu compiled by nvcc
absl::Status LinearMemoryCuda(const Context& ctx, const LinearMemoryArgs& args);
}  // namespace cuda
namespace cuda_emu {  // the same source on the CUDA emulator
absl::Status LinearMemoryCuda(const Context& ctx, const LinearMemoryArgs& args);
}  // namespace cuda_emu
}  // namespace internal

}  // namespace mcserve::kernels
