// DeltaDecode: a (gated) DeltaNet layer's decode step between its grouped projection and its output
// stage, one token per sequence. It first takes β = scale · σ(b) and α = SoftplusDecay(a) from their
// projected rows (a few values, on the calling thread), then runs one pass over (sequence, head) tasks:
// each convolves its head's q, k and v channels (SiLU after each), L2-normalises its q and k rows (q
// then scaled) and runs its head's gated delta rule. The results are what Activation, Gate, ShortConv
// on q, k and v, L2Norm on q and k, then LinearMemory (kGatedDelta) give one after the other, bit for
// bit, with one op and one pool hand-off instead of eight ops and their tensors on the calling thread.
// CPU only: on other devices the engine runs the ops one by one.
// Any thread; calls sharing a Context.pool must not overlap.
#pragma once

#include "absl/status/status.h"
#include "kernels/core/context.h"
#include "kernels/linear_memory/linear_memory.h"
#include "kernels/short_conv/short_conv.h"

namespace mcserve::kernels {

struct DeltaDecodeArgs {
  // q, k, v in that order, each as ShortConv takes it, SiLU on and no bias: x [B, H·K] (or [B, H·V])
  // the projected rows, one token per sequence (cu_seqlens 0, 1, ..., B); out [B, H·K] the conv'd
  // rows, which this op also normalises in place for q and k.
  ShortConvArgs conv[3];
  const Tensor* taps[3] = {};  // [W, D] F32 each: conv[i].weight transposed (tap j of every channel in row j)
  float q_scale = 1.0f;        // q's factor after its L2 norm (K^-1/2 for matrix memories)
  float norm_eps = 1e-6f;      // the L2 norm's eps: x / sqrt(Σx² + eps)
  const Tensor* beta_logits = nullptr;   // [B, H] b_proj's rows, β = beta_scale · σ(x); null: β = beta_scale
  float beta_scale = 1.0f;
  const Tensor* decay_logits = nullptr;  // [B, H] a_proj's rows, α = SoftplusDecay(x, a_log, dt_bias); null: α = 1
  const Tensor* a_log = nullptr;         // [H] F32, with decay_logits
  const Tensor* dt_bias = nullptr;       // [H] F32, with decay_logits
  Tensor* beta = nullptr;   // [B, H] F32: β, written here
  Tensor* decay = nullptr;  // [B, H] F32: α, written here; present exactly when decay_logits is
  // kGatedDelta over the convs' outs viewed [B, H, K] / [B, H, V] (the same heads for q, k and v), with
  // beta and decay the two above; its layout is the convs'.
  LinearMemoryArgs memory;
};

absl::Status DeltaDecode(const Context& ctx, const DeltaDecodeArgs& args);

namespace internal {
absl::Status DeltaDecodeCpu(const Context& ctx, const DeltaDecodeArgs& args);
}  // namespace internal

}  // namespace mcserve::kernels
