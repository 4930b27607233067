// HopeFeatures: the first half of HOPE's scan (hope_memory.h) — per sequence and head, token by token,
// the fast memories' anchor refresh at (t−1) mod C_o = 0, the producers M_k, M_v, M_eta, M_alpha (, M_q),
// the conv windows, the L2 norms and the gates, and the fast memories' writes (steps 1–4 and 6 of
// hope_memory.h for every memory but M_mem) — writing the features M_mem consumes. M_mem itself runs in
// HopeMemWrite (hope_mem_write.h); the two calls in sequence equal HopeMemory bit for bit. Memory
// Caching restarts and caches only M_mem, so this half runs exactly as without MC.
// Any thread; calls sharing a Context.pool must not overlap.
#pragma once

#include "absl/status/status.h"
#include "kernels/core/batch_layout.h"
#include "kernels/core/context.h"
#include "kernels/core/tensor.h"
#include "kernels/hope_memory/hope_memory.h"

namespace mcserve::kernels {

// Inputs, state and weights as HopeMemoryArgs (without M_mem's), plus the features it writes. phase[i]
// may be reduced modulo any multiple of C_o.
struct HopeFeaturesArgs {
  HopeMemoryOptions options;
  const Tensor* x = nullptr;            // [T, H, d] F32 memory input
  const Tensor* q_pre = nullptr;        // [T, H, d] F32 (null with adaptive_q)
  const Tensor* beta = nullptr;         // [T, H] F32 momentum gate of the fast memories (kData only)
  const Tensor* skip = nullptr;         // optional [2, H, d] F32
  const Tensor* q_conv = nullptr;       // [H·d, 1, K] F32
  const Tensor* k_conv = nullptr;       // [H·d, 1, K] F32
  const Tensor* v_conv = nullptr;       // [H·d, 1, K] F32
  const Tensor* phase = nullptr;        // [B] I32 ≥ 0
  BatchLayout layout;                   // sequence i: rows [cu[i], cu[i+1]), slot slot_ids[i]
  Tensor* fast = nullptr;               // [num_slots, H, Pf] F32, in/out
  Tensor* fast_anchor = nullptr;        // [num_slots, H, Pf] F32, in/out
  Tensor* fast_momentum = nullptr;      // [num_slots, H, Pf] F32 (momentum only, else null)
  Tensor* conv_q = nullptr;             // [num_slots, K−1, H·d] F32 (null when K = 1)
  Tensor* conv_k = nullptr;             // [num_slots, K−1, H·d] F32 (null when K = 1)
  Tensor* conv_v = nullptr;             // [num_slots, K−1, H·d] F32 (null when K = 1)
  Tensor* q = nullptr;                  // [T, H, d] F32 out: L2(SiLU(conv q~))
  Tensor* k = nullptr;                  // [T, H, d] F32 out: L2(SiLU(conv k~))
  Tensor* v = nullptr;                  // [T, H, d] F32 out: SiLU(conv v~)
  Tensor* alpha = nullptr;              // [T, H] F32 out: α
  Tensor* eta = nullptr;                // [T, H] F32 out: η (clamped with eta_clamp)
};

// Runs the first half on ctx.device (CUDA: the shared-memory limit of HopeMemory).
absl::Status HopeFeatures(const Context& ctx, const HopeFeaturesArgs& args);

namespace internal {
absl::Status HopeFeaturesCpu(const Context& ctx, const HopeFeaturesArgs& args);
namespace cuda {
absl::Status HopeFeaturesCuda(const Context& ctx, const HopeFeaturesArgs& args);
}  // namespace cuda
namespace cuda_emu {
absl::Status HopeFeaturesCuda(const Context& ctx, const HopeFeaturesArgs& args);
}  // namespace cuda_emu
}  // namespace internal

}  // namespace mcserve::kernels
