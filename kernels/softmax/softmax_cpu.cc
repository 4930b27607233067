// CPU Softmax: rows are independent; threaded over rows when the tensor is large.
#include "kernels/core/tensor_data.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/softmax/softmax.h"
#include "kernels/softmax/softmax_math.h"

namespace mcserve::kernels::internal {
namespace {

constexpr int64_t kMinParallelElements = 1 << 16;

}  // namespace

absl::Status SoftmaxCpu(const Context& ctx, const SoftmaxArgs& args) {
  const int64_t rows = args.x->dim(0), n = args.x->dim(1);
  if (rows == 0 || n == 0) return absl::OkStatus();
  const float* x = Data<float>(*args.x);
  float* out = Data<float>(*args.out);
  cpu::ThreadPool* pool = rows * n >= kMinParallelElements ? ctx.pool : nullptr;
  cpu::ParallelFor(pool, rows, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) softmax_math::SoftmaxRow(x + r * n, n, out + r * n);
  });
  return absl::OkStatus();
}

}  // namespace mcserve::kernels::internal
