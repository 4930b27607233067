// CPU DeltaDecode: one task per (sequence, head), each running its head's conv channels, norms and
// gated delta rule with the code ShortConv, L2Norm and LinearMemory run (short_conv_rows_cpu.h,
// l2_norm_math.h, gated_delta_dispatch.h), so the results are theirs bit for bit.
#include <algorithm>
#include <span>

#include "kernels/core/tensor_data.h"
#include "kernels/cpu/scratch.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/delta_decode/delta_decode.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/gate/gate_math.h"
#include "kernels/l2_norm/l2_norm_math.h"
#include "kernels/linear_memory/gated_delta_dispatch.h"
#include "kernels/linear_memory/linear_memory_math.h"
#include "kernels/short_conv/short_conv_rows_cpu.h"

namespace mcserve::kernels::internal {
namespace {

// Memory elements updated (sequences × heads × K × V) from which the tasks go to the pool: LinearMemory's
// bar (a decode token's four 64×64 heads are split), since the recurrence is most of a task.
constexpr int64_t kMinParallelElements = int64_t{1} << 14;

// One sequence's conv of channels [c0, c0 + n) of conv `c` (one token), in pieces of kShortConvMaxChannels.
void ConvHead(const ShortConvArgs& c, const ShortConvTaps& taps, int64_t b, int32_t slot, int64_t c0, int64_t n) {
  const int64_t d = c.x->dim(1);
  const int width = static_cast<int>(c.weight->dim(2));
  const float* xs = Data<float>(*c.x) + b * d;
  float* os = Data<float>(*c.out) + b * d;
  float* st = Data<float>(*c.state) + static_cast<int64_t>(slot) * (width - 1) * d;
  for (int64_t at = c0; at < c0 + n; at += kShortConvMaxChannels) {
    ShortConvChannels(taps, xs, 1, st, d, width, at, std::min(kShortConvMaxChannels, c0 + n - at), /*silu=*/true, os);
  }
}

// x [n] *= scale / sqrt(Σx² + eps), as L2Norm's kL2 row.
void NormalizeHead(float* x, int64_t n, float eps, float scale) {
  l2_norm_math::ScaleRow(x, n, l2_norm_math::RowFactor(RowNormKind::kL2, x, n, eps, scale), x);
}

// memory.beta [B, H] = beta_scale · σ(beta_logits) (or beta_scale) and memory.decay [B, H] =
// SoftplusDecay(decay_logits, a_log, dt_bias), computed as Activation and Gate compute them. n = B·H.
void WriteGates(const DeltaDecodeArgs& a, int64_t n, int64_t heads) {
  float* beta = Data<float>(*a.beta);
  if (a.beta_logits != nullptr) {
    SigmoidRangeCpu(Data<float>(*a.beta_logits), a.beta_scale, beta, n);
  } else {
    std::fill(beta, beta + n, a.beta_scale);
  }
  if (a.decay_logits == nullptr) return;
  const float* x = Data<float>(*a.decay_logits);
  const float* a_log = Data<float>(*a.a_log);
  const float* dt_bias = Data<float>(*a.dt_bias);
  float* decay = Data<float>(*a.decay);
  for (int64_t i = 0; i < n; ++i) decay[i] = gate_math::SoftplusDecay(x[i], a_log[i % heads], dt_bias[i % heads]);
}

}  // namespace

absl::Status DeltaDecodeCpu(const Context& ctx, const DeltaDecodeArgs& a) {
  const LinearMemoryArgs& m = a.memory;
  const int64_t seqs = m.layout.slot_ids->dim(0);
  if (seqs == 0) return absl::OkStatus();
  const int64_t heads = m.state->dim(1), kd = m.q->dim(2), vd = m.v->dim(2), kv = kd * vd;
  const int32_t* slots = Data<int32_t>(*m.layout.slot_ids);
  WriteGates(a, seqs * heads, heads);
  ShortConvTaps taps[3];  // shared read-only by every task: no bias
  for (int i = 0; i < 3; ++i) taps[i] = {.taps = {Data<float>(*a.taps[i]), static_cast<size_t>(a.taps[i]->numel())}};
  float* q = Data<float>(*a.conv[0].out);  // [B, H, K], normalised in place
  float* k = Data<float>(*a.conv[1].out);  // [B, H, K]
  const float* v = Data<float>(*a.conv[2].out);  // [B, H, V]
  const float* beta = Data<float>(*m.beta);      // [B, H]
  const float* decay = m.decay != nullptr ? Data<float>(*m.decay) : nullptr;  // [B, H]
  float* state = Data<float>(*m.state);  // [slots, H, K, V]
  float* out = Data<float>(*m.out);      // [B, H, V]
  const GatedDeltaStepFn step = GatedDeltaVectorStep(static_cast<int>(vd));
  cpu::ThreadPool* pool = seqs * heads * kv >= kMinParallelElements ? ctx.pool : nullptr;
  cpu::ParallelFor(pool, seqs * heads, [&](int64_t begin, int64_t end) {
    const std::span<float> generic_scratch = cpu::ThreadScratch(vd);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / heads, h = task % heads;
      const int32_t slot = slots[b];
      ConvHead(a.conv[0], taps[0], b, slot, h * kd, kd);
      ConvHead(a.conv[1], taps[1], b, slot, h * kd, kd);
      ConvHead(a.conv[2], taps[2], b, slot, h * vd, vd);
      float* qh = q + task * kd;
      float* kh = k + task * kd;
      NormalizeHead(qh, kd, a.norm_eps, a.q_scale);
      NormalizeHead(kh, kd, a.norm_eps, 1.0f);
      float* S = state + (static_cast<int64_t>(slot) * heads + h) * kv;
      const float alpha = decay != nullptr ? decay[task] : 1.0f;
      float* o = out + task * vd;
      if (step != nullptr) {
        const float* next = task + 1 < end ? state + (static_cast<int64_t>(slots[(task + 1) / heads]) * heads +
                                                      (task + 1) % heads) * kv
                                           : nullptr;
        step({.S = S, .q = qh, .k = kh, .v = v + task * vd, .alpha = alpha, .beta = beta[task],
              .K = static_cast<int>(kd), .V = static_cast<int>(vd), .o = o, .next = next,
              .prefetch_bytes = static_cast<int>(kv * sizeof(float))});
      } else {
        GatedDeltaStep(S, qh, kh, v + task * vd, alpha, beta[task], static_cast<int>(kd), static_cast<int>(vd), o,
                       generic_scratch.data());
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace mcserve::kernels::internal
