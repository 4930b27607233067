// CPU Gate: per-element decay factors; threaded over rows (tokens) when the tensor is large.
#include <vector>

#include "base/status_macros.h"
#include "kernels/core/tensor_data.h"
#include "kernels/cpu/scratch.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cpu/vec_math.h"
#include "kernels/gate/gate.h"
#include "kernels/gate/gate_math.h"

namespace mcserve::kernels::internal {
namespace {

constexpr int64_t kMinParallelElements = 1 << 15;

// out [begin, end) = LogSigmoidDecay(x) per element, 8 at a time; x, out: flat [rows · n].
void LogSigmoidDecayRange(const float* x, float normalizer, bool has_clamp, float clamp_min, int64_t begin, int64_t end,
                          float* out) {
  namespace vec = cpu::vec;
  const __m256 norm = _mm256_set1_ps(normalizer), lo = _mm256_set1_ps(clamp_min);
  vec::ForEach8(
      begin, end,
      [&](int64_t i) {
        __m256 g = _mm256_div_ps(vec::LogSigmoid(_mm256_loadu_ps(x + i)), norm);
        if (has_clamp) g = _mm256_max_ps(g, lo);
        _mm256_storeu_ps(out + i, vec::Exp(g));
      },
      [&](int64_t i) { out[i] = gate_math::LogSigmoidDecay(x[i], normalizer, has_clamp, clamp_min); });
}

}  // namespace

absl::Status GateCpu(const Context& ctx, const GateArgs& args) {
  const int64_t rows = args.x->dim(0), n = args.x->dim(1);
  const float* x = Data<float>(*args.x);
  float* out = Data<float>(*args.out);
  cpu::ThreadPool* pool = rows * n >= kMinParallelElements ? ctx.pool : nullptr;
  if (args.kind == GateKind::kSoftplusDecay) {
    cpu::ScratchCarver widened(cpu::OpScratch(args.a_log->numel() + args.dt_bias->numel()));
    const float* a_log = F32View(*args.a_log, widened.Take(args.a_log->numel()));        // [H]
    const float* dt_bias = F32View(*args.dt_bias, widened.Take(args.dt_bias->numel()));  // [H]
    if (a_log == nullptr || dt_bias == nullptr) return absl::InvalidArgumentError("Gate: a_log/dt_bias not readable");
    cpu::ParallelFor(pool, rows, [&](int64_t begin, int64_t end) {
      // Scalar: one value per head (few per token), and exp(−A·softplus) turns a 1-ulp change of its
      // argument into ~|argument| ulps, so it keeps libm's correctly rounded expf and log1pf.
      for (int64_t t = begin; t < end; ++t) {
        for (int64_t h = 0; h < n; ++h) {
          out[t * n + h] = gate_math::SoftplusDecay(x[t * n + h], a_log[h], dt_bias[h]);
        }
      }
    });
  } else {
    const float normalizer = args.normalizer, clamp_min = args.clamp_min;
    const bool has_clamp = args.has_clamp_min;
    cpu::ParallelFor(pool, rows, [&](int64_t begin, int64_t end) {
      LogSigmoidDecayRange(x, normalizer, has_clamp, clamp_min, begin * n, end * n, out);
    });
  }
  return absl::OkStatus();
}

}  // namespace mcserve::kernels::internal
