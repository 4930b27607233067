// CPU GatedFusion: rows are independent; threaded over rows when the tensor is large.
#include "kernels/core/tensor_data.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/gated_fusion/gated_fusion.h"
#include "kernels/gated_fusion/gated_fusion_math.h"

namespace mcserve::kernels::internal {
namespace {

constexpr int64_t kMinParallelElements = 1 << 16;

}  // namespace

absl::Status GatedFusionCpu(const Context& ctx, const GatedFusionArgs& args) {
  const int64_t rows = args.local->dim(0), d = args.local->dim(1);
  if (rows == 0 || d == 0) return absl::OkStatus();
  const float* g = Data<float>(*args.gate);
  const float* b = args.gate_bias != nullptr ? Data<float>(*args.gate_bias) : nullptr;
  const float* local = Data<float>(*args.local);
  const float* global = Data<float>(*args.global);
  float* out = Data<float>(*args.out);
  cpu::ThreadPool* pool = rows * d >= kMinParallelElements ? ctx.pool : nullptr;
  cpu::ParallelFor(pool, rows, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* gr = g + r * 2 * d;
      for (int64_t c = 0; c < d; ++c) {
        const float bl = b != nullptr ? b[c] : 0.0f, bg = b != nullptr ? b[d + c] : 0.0f;
        out[r * d + c] = gated_fusion_math::Fuse(gr[c], bl, gr[d + c], bg, local[r * d + c], global[r * d + c]);
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace mcserve::kernels::internal
