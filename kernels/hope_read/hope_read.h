// HopeRead: one token's query path of HOPE's M_mem read with every fast weight frozen — the part of
// the self-modifying Titans mixer that carries gradient for the adaptive CMS (docs/model-format.md,
// `hope`, cms_adaptive). Per row and head, with the conv window and M_mem's weights W (W2 [E, d]
// applied first, W1 [d, E]) the token's read used:
//   p = Σ_{i<K−1} w_i win_i + w_{K−1} q~,  s = SiLU(p),  q = s / √(Σs² + 1e-6),  y = q + W1 σ(W2 q)
// Forward: y. Backward (dy given): dq~ = ∂⟨dy, y⟩/∂q~ (only the current conv tap carries gradient).
// With query false the read is of the input itself, y = x + W1 σ(W2 x) (M_q's read of the memory input
// with adaptive_q), and the backward gives ∂⟨dy, y⟩/∂x.
// Any thread; calls sharing a Context.pool must not overlap.
#pragma once

#include "absl/status/status.h"
#include "kernels/core/context.h"
#include "kernels/core/tensor.h"
#include "kernels/hope_memory/hope_memory.h"

namespace mcserve::kernels {

struct HopeReadArgs {
  HopeActivation activation = HopeActivation::kSilu;  // σ of M_mem
  int expansion = 2;                                  // E = expansion·d
  bool query = true;               // the query path (q~ → conv → SiLU → L2); false: a raw read of q_pre
  const Tensor* q_pre = nullptr;   // [n, H, d] F32 this token's pre-conv query q~ (raw read: its input x)
  const Tensor* window = nullptr;  // [n, K−1, H·d] F32 the q conv window before the token (null when K = 1
                                   // or for a raw read)
  const Tensor* q_conv = nullptr;  // [H·d, 1, K] F32 (null for a raw read)
  const Tensor* memory = nullptr;  // [n, H, P] F32 the weights the read used, at weights_offset in each row
  int64_t weights_offset = 0;      // floats before the memory's W2 in each [P] row (P ≥ offset + 2·E·d)
  const Tensor* dy = nullptr;      // [n, H, d] F32 ∂L/∂y, or null for the forward
  Tensor* out = nullptr;           // [n, H, d] F32: y (forward) or dq~ (backward)
};

absl::Status HopeRead(const Context& ctx, const HopeReadArgs& args);

namespace internal {
// The checked arguments with the per-(row, head) workspace [n, H, 3·d + 2·E] the op allocates.
struct HopeReadCall {
  HopeReadArgs args;
  Tensor* work = nullptr;
};
absl::Status HopeReadCpu(const Context& ctx, const HopeReadCall& call);
namespace cuda {  // hope_read_cuda.cu compiled by nvcc
absl::Status HopeReadCuda(const Context& ctx, const HopeReadCall& call);
}  // namespace cuda
namespace cuda_emu {  // the same source on the CUDA emulator
absl::Status HopeReadCuda(const Context& ctx, const HopeReadCall& call);
}  // namespace cuda_emu
}  // namespace internal

}  // namespace mcserve::kernels
