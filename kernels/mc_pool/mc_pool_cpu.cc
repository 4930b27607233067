#include "kernels/core/tensor_data.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/mc_pool/mc_pool.h"
#include "kernels/mc_pool/mc_pool_math.h"

namespace mcserve::kernels::internal {

absl::Status McSegmentPoolCpu(const Context& ctx, const McSegmentPoolArgs& a) {
  const Tensor &k = *a.k;
  const int64_t hk = k.dim(1), dim = k.dim(2), hs = a.out->dim(1), ratio = hs / hk;
  const int32_t* cu = Data<int32_t>(*a.layout.cu_seqlens);
  const int32_t* slots = Data<int32_t>(*a.layout.slot_ids);
  const int32_t* first = Data<int32_t>(*a.first_local);
  const int64_t num_seqs = a.layout.slot_ids->dim(0);
  const float* kp = Data<float>(k);
  float* sum = Data<float>(*a.pool_sum);
  float* out = Data<float>(*a.out);
  cpu::ParallelFor(num_seqs * hs >= 64 ? ctx.pool : nullptr, num_seqs * hs, [&](int64_t w0, int64_t w1) {
    for (int64_t w = w0; w < w1; ++w) {
      const int64_t b = w / hs, h = w % hs;
      float* s = sum + (static_cast<int64_t>(slots[b]) * hs + h) * dim;
      for (int64_t r = cu[b]; r < cu[b + 1]; ++r) {
        const int64_t j = (first[b] - 1 + (r - cu[b])) % a.segment_size + 1;
        mc_pool_math::PoolRow(s, kp + (r * hk + h / ratio) * dim, dim, j, j == 1, a.mean, out + (r * hs + h) * dim);
      }
    }
  });
  return absl::OkStatus();
}

absl::Status McLevelPoolCpu(const Context& ctx, const McLevelPoolArgs& a) {
  const Tensor& k = *a.k;
  const int64_t hk = k.dim(1), dim = k.dim(2), hs = a.out->dim(1), ratio = hs / hk;
  const int levels = static_cast<int>(a.level_sums->dim(2));
  const int32_t* cu = Data<int32_t>(*a.layout.cu_seqlens);
  const int32_t* slots = Data<int32_t>(*a.layout.slot_ids);
  const int32_t* first = Data<int32_t>(*a.first_position);
  const int64_t num_seqs = a.layout.slot_ids->dim(0);
  const float* kp = Data<float>(k);
  float* sums = Data<float>(*a.level_sums);
  float* out = Data<float>(*a.out);
  cpu::ParallelFor(num_seqs * hs >= 64 ? ctx.pool : nullptr, num_seqs * hs, [&](int64_t w0, int64_t w1) {
    for (int64_t w = w0; w < w1; ++w) {
      const int64_t b = w / hs, h = w % hs;
      float* s = sums + (static_cast<int64_t>(slots[b]) * hs + h) * levels * dim;
      for (int64_t r = cu[b]; r < cu[b + 1]; ++r) {
        mc_pool_math::LevelPoolRow(s, kp + (r * hk + h / ratio) * dim, dim, levels, first[b] + (r - cu[b]), a.mean,
                                   out + (r * hs + h) * dim);
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace mcserve::kernels::internal
