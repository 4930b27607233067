// CPU LinearMemory: tasks are (sequence, state head) pairs run in parallel; the tokens of one
// sequence run in order against that head's [K, V] memory, which stays in cache across tokens. The
// gated delta rule runs on AVX-512 or AVX2 vector kernels (gated_delta_dispatch.h, bit-identical to the
// generic step), asking for the next task's memory while it works on this one.
#include <vector>

#include "kernels/core/tensor_data.h"
#include "kernels/cpu/scratch.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/linear_memory/gated_delta_dispatch.h"
#include "kernels/linear_memory/linear_memory.h"
#include "kernels/linear_memory/linear_memory_math.h"

namespace mcserve::kernels::internal {
namespace {

// Memory elements updated (tokens × heads × K × V) below which the call runs on the calling thread. A
// decode token's four 64×64 heads (2^14) are split: against 2^16 (batch 1 and 2 on one thread), on an
// AMD Zen 4 VM at 2 threads, ab_decode read 1.01-1.04x (batch 1 and 2, F32 and BF16; bench/README.md).
// Each thread claims its own lane's heads first, so mostly the same heads every token, and their
// memories stay in its cache.
constexpr int64_t kMinParallelElements = int64_t{1} << 14;

const float* OptData(const Tensor* t) { return t != nullptr ? Data<float>(*t) : nullptr; }

}  // namespace

absl::Status LinearMemoryCpu(const Context& ctx, const LinearMemoryArgs& args) {
  const int64_t hq = args.q->dim(1), hk = args.k->dim(1), hv = args.v->dim(1);
  const int64_t hs = args.state->dim(1);
  const int kd = static_cast<int>(args.q->dim(2)), vd = static_cast<int>(args.v->dim(2));
  const int64_t num_seqs = args.layout.slot_ids->dim(0);
  if (num_seqs == 0) return absl::OkStatus();
  const int64_t gq = hs / hq, gk = hs / hk, gv = hs / hv;

  const int32_t* cu = Data<int32_t>(*args.layout.cu_seqlens);
  const int32_t* slots = Data<int32_t>(*args.layout.slot_ids);
  const float* qd = Data<float>(*args.q);
  const float* kdp = Data<float>(*args.k);
  const float* vdp = Data<float>(*args.v);
  const float* key_decay = OptData(args.key_decay);
  const float* decay = OptData(args.decay);
  const float* beta = OptData(args.beta);
  const float* gamma = OptData(args.gamma);
  float* state = Data<float>(*args.state);
  float* aux = args.aux != nullptr ? Data<float>(*args.aux) : nullptr;
  float* out = Data<float>(*args.out);
  const LinearMemoryRule rule = args.rule;
  const bool normalize = args.normalize;
  const int64_t kv = static_cast<int64_t>(kd) * vd;
  // Per-head aux size: z [K], (k, v)_prev [K + V], momentum [K, V].
  const int64_t aux_n = rule == LinearMemoryRule::kSwla ? kd + vd : rule == LinearMemoryRule::kTitans ? kv : kd;
  const GatedDeltaStepFn delta_step = rule == LinearMemoryRule::kGatedDelta ? GatedDeltaVectorStep(vd) : nullptr;
  // Task `task`'s memory [K, V] in the pool.
  auto memory = [&](int64_t task) { return state + (static_cast<int64_t>(slots[task / hs]) * hs + task % hs) * kv; };

  const int64_t work = (cu[num_seqs] - cu[0]) * hs * kv;  // memory elements updated
  cpu::ParallelFor(work >= kMinParallelElements ? ctx.pool : nullptr, num_seqs * hs, [&](int64_t begin, int64_t end) {
    const std::span<float> scratch = cpu::ThreadScratch(vd);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / hs, h = task % hs;
      const int64_t sh = static_cast<int64_t>(slots[b]) * hs + h;  // state head index in the pool
      float* S = state + sh * kv;
      float* A = aux != nullptr ? aux + sh * aux_n : nullptr;
      const float* next = task + 1 < end ? memory(task + 1) : nullptr;  // asked for during the last token
      const int64_t qh = h / gq, kh = h / gk, vh = h / gv;
      for (int64_t t = cu[b]; t < cu[b + 1]; ++t) {
        const float* q = qd + (t * hq + qh) * kd;
        const float* k = kdp + (t * hk + kh) * kd;
        const float* v = vdp + (t * hv + vh) * vd;
        float* o = out + (t * hs + h) * vd;
        const int64_t th = t * hs + h;  // index into [T, Hs] gates
        switch (rule) {
          case LinearMemoryRule::kAdditive:
            AdditiveStep(S, q, k, v, key_decay != nullptr ? key_decay + (t * hk + kh) * kd : nullptr, kd, vd, o);
            if (normalize) NormalizeStep(A, q, k, kd, vd, o);
            break;
          case LinearMemoryRule::kGatedDelta: {
            const float alpha = decay != nullptr ? decay[th] : 1.0f;
            if (delta_step != nullptr) {
              delta_step({.S = S, .q = q, .k = k, .v = v, .alpha = alpha, .beta = beta[th], .K = kd, .V = vd, .o = o,
                          .next = t + 1 == cu[b + 1] ? next : nullptr,
                          .prefetch_bytes = static_cast<int>(kv * sizeof(float))});
            } else {
              GatedDeltaStep(S, q, k, v, alpha, beta[th], kd, vd, o, scratch.data());
            }
            break;
          }
          case LinearMemoryRule::kSwla:
            SwlaStep(S, q, k, v, decay[th], beta[th], gamma[th], kd, vd, A, o);
            break;
          case LinearMemoryRule::kTitans:
            TitansStep(S, A, q, k, v, decay[th], beta[th], gamma[th], kd, vd, o, scratch.data());
            break;
        }
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace mcserve::kernels::internal
