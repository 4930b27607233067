// CPU LayerNorm: rows are independent; threaded over rows when the tensor is large.
#include "kernels/core/tensor_data.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/layer_norm/layer_norm.h"
#include "kernels/layer_norm/layer_norm_math.h"

namespace mcserve::kernels::internal {
namespace {

constexpr int64_t kMinParallelElements = 1 << 16;

}  // namespace

absl::Status LayerNormCpu(const Context& ctx, const LayerNormArgs& args) {
  const int64_t rows = args.x->dim(0), n = args.x->dim(1);
  if (rows == 0 || n == 0) return absl::OkStatus();
  const float* x = Data<float>(*args.x);
  const float* w = Data<float>(*args.weight);
  const float* b = Data<float>(*args.bias);
  float* out = Data<float>(*args.out);
  const float eps = args.eps;
  cpu::ThreadPool* pool = rows * n >= kMinParallelElements ? ctx.pool : nullptr;
  cpu::ParallelFor(pool, rows, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) layer_norm_math::NormalizeRow(x + r * n, w, b, n, eps, out + r * n);
  });
  return absl::OkStatus();
}

}  // namespace mcserve::kernels::internal
