// CPU RmsNorm: rows are independent; threaded over rows when the tensor is large.
#include <vector>

#include "base/status_macros.h"
#include "kernels/core/tensor_data.h"
#include "kernels/cpu/scratch.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cpu/vec_math.h"
#include "kernels/rms_norm/rms_norm.h"
#include "kernels/rms_norm/rms_norm_math.h"

namespace mcserve::kernels::internal {
namespace {

// From a batch of 32 rows of 256 (a hand-off ~0.7 µs, such a norm ~2-3 µs on one thread): 1.05x on
// the BF16 batch-32 decode step at 1 << 13 against 1 << 16 (bench/README.md, Intel Xeon with AMX).
constexpr int64_t kMinParallelElements = 1 << 13;

// out = x · inv · w · swish(g), swish 8 at a time (rms_norm_math::NormalizeElementGated's order of
// products); x, w, g, out: [n]; out may alias x or g.
void NormalizeRowGated(const float* x, const float* w, const float* g, int64_t n, float inv, float* out) {
  const __m256 vinv = _mm256_set1_ps(inv);
  cpu::vec::ForEach8(
      0, n,
      [&](int64_t i) {
        const __m256 xw = _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vinv), _mm256_loadu_ps(w + i));
        _mm256_storeu_ps(out + i, _mm256_mul_ps(xw, cpu::vec::Silu(_mm256_loadu_ps(g + i))));
      },
      [&](int64_t i) { out[i] = rms_norm_math::NormalizeElementGated(x[i], inv, w[i], g[i]); });
}

}  // namespace

absl::Status RmsNormCpu(const Context& ctx, const RmsNormArgs& args) {
  const int64_t rows = args.x->dim(0), n = args.x->dim(1);
  if (rows == 0 || n == 0) return absl::OkStatus();
  const float* w = F32View(*args.weight, cpu::OpScratch(args.weight->numel()));  // [n]
  if (w == nullptr) return absl::InvalidArgumentError("RmsNorm: weight not readable as F32");
  const float* x = Data<float>(*args.x);
  const float* g = args.gate != nullptr ? Data<float>(*args.gate) : nullptr;
  float* out = Data<float>(*args.out);
  const float eps = args.eps;
  cpu::ThreadPool* pool = rows * n >= kMinParallelElements ? ctx.pool : nullptr;
  cpu::ParallelFor(pool, rows, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* xr = x + r * n;
      const float inv = rms_norm_math::InvRms(xr, n, eps);
      if (g != nullptr) {
        NormalizeRowGated(xr, w, g + r * n, n, inv, out + r * n);
      } else {
        rms_norm_math::NormalizeRow(xr, w, nullptr, n, inv, out + r * n);
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace mcserve::kernels::internal
