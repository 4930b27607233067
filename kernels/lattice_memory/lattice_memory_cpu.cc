// CPU LatticeMemory: tasks are (sequence, head) pairs run in parallel; the tokens of one sequence run
// in order against that head's [m, d] slots.
#include <vector>

#include "kernels/core/tensor_data.h"
#include "kernels/cpu/scratch.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/lattice_memory/lattice_memory.h"
#include "kernels/lattice_memory/lattice_memory_math.h"

namespace mcserve::kernels::internal {

absl::Status LatticeMemoryCpu(const Context& ctx, const LatticeMemoryArgs& args) {
  const int64_t hs = args.q->dim(1);
  const int m = static_cast<int>(args.q->dim(2)), d = static_cast<int>(args.v->dim(2));
  const int64_t num_seqs = args.layout.slot_ids->dim(0);
  if (num_seqs == 0) return absl::OkStatus();
  const int32_t* cu = Data<int32_t>(*args.layout.cu_seqlens);
  const int32_t* slots = Data<int32_t>(*args.layout.slot_ids);
  const float* q = Data<float>(*args.q);
  const float* k = Data<float>(*args.k);
  const float* v = Data<float>(*args.v);
  const float* gamma = Data<float>(*args.gamma);
  const float* mu = args.mu != nullptr ? Data<float>(*args.mu) : nullptr;
  float* state = Data<float>(*args.state);
  float* out = Data<float>(*args.out);
  const LatticeStepOptions opt{.variant = args.variant, .analytic = args.analytic_renorm,
                               .normalized_readout = args.normalized_readout};
  const int64_t md = static_cast<int64_t>(m) * d;

  cpu::ParallelFor(ctx.pool, num_seqs * hs, [&](int64_t begin, int64_t end) {
    const std::span<float> scratch = cpu::ThreadScratch(2 * m + d);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / hs, h = task % hs;
      float* M = state + (static_cast<int64_t>(slots[b]) * hs + h) * md;
      for (int64_t t = cu[b]; t < cu[b + 1]; ++t) {
        const int64_t th = t * hs + h;
        LatticeStep(M, q + th * m, k + th * m, v + th * d, gamma[th], mu != nullptr ? mu[th] : 1.0f, m, d, opt,
                    out + th * d, scratch.data());
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace mcserve::kernels::internal
