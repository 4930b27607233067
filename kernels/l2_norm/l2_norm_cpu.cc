// CPU L2Norm: rows are independent; threaded over rows when the tensor is large.
#include "kernels/core/tensor_data.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/l2_norm/l2_norm.h"
#include "kernels/l2_norm/l2_norm_math.h"

namespace mcserve::kernels::internal {
namespace {

// From a batch of 32 rows of 256 (a hand-off ~0.7 µs, such a norm ~2-3 µs on one thread): 1.05x on
// the BF16 batch-32 decode step at 1 << 13 against 1 << 16 (bench/README.md, Intel Xeon with AMX).
constexpr int64_t kMinParallelElements = 1 << 13;

}  // namespace

absl::Status L2NormCpu(const Context& ctx, const L2NormArgs& args) {
  const int64_t rows = args.x->dim(0), n = args.x->dim(1);
  const float* x = Data<float>(*args.x);
  float* out = Data<float>(*args.out);
  cpu::ThreadPool* pool = rows * n >= kMinParallelElements ? ctx.pool : nullptr;
  cpu::ParallelFor(pool, rows, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float f = l2_norm_math::RowFactor(args.kind, x + r * n, n, args.eps, args.scale);
      l2_norm_math::ScaleRow(x + r * n, n, f, out + r * n);
    }
  });
  return absl::OkStatus();
}

}  // namespace mcserve::kernels::internal
