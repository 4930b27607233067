// CPU GatherRows: one table row per id, widened to F32, threaded over ids for large gathers.
#include <cstdint>

#include "kernels/core/tensor_data.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/gather_rows/gather_rows.h"
#include "kernels/gather_rows/gather_rows_math.h"

namespace mcserve::kernels::internal {
namespace {

constexpr int64_t kMinParallelElements = 1 << 16;

}  // namespace

absl::Status GatherRowsCpu(const Context& ctx, const GatherRowsArgs& args) {
  const Tensor& table = *args.table;
  const int64_t m = args.ids->dim(0), h = table.dim(1), vocab = table.dim(0);
  const int32_t* ids = Data<int32_t>(*args.ids);
  float* out = Data<float>(*args.out);
  const DType dtype = table.dtype();
  const void* base = RawData(table);
  for (int64_t i = 0; i < m; ++i) {  // GatherRows() validated these; re-check before indexing memory
    if (!gather_rows_math::IdInRange(ids[i], vocab)) return absl::InvalidArgumentError("GatherRows: id out of range");
  }
  cpu::ThreadPool* pool = m * h >= kMinParallelElements ? ctx.pool : nullptr;
  cpu::ParallelFor(pool, m, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t row = ids[i];
      float* dst = out + i * h;
      switch (dtype) {
        case DType::kF32:
          gather_rows_math::CopyRowF32(static_cast<const float*>(base) + row * h, h, dst);
          break;
        case DType::kBF16:
          gather_rows_math::WidenRowBf16(static_cast<const uint16_t*>(base) + row * h, h, dst);
          break;
        case DType::kF16:
          gather_rows_math::WidenRowF16(static_cast<const uint16_t*>(base) + row * h, h, dst);
          break;
        case DType::kI32:
          break;  // rejected by validation
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace mcserve::kernels::internal
