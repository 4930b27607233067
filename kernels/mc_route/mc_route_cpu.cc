// CPU McRoute: the (token, head) pairs are split over the pool; each task owns its score and keep
// scratch (sized for the longest list), scores with ScorePages (Dot's order, rounded exactly as the
// CPU read-out rounds the same scores, so that both keep the same pages) and selects with the shared
// SelectTopK. Every pair is independent, so the result never depends on the thread count.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/core/tensor_data.h"
#include "kernels/cpu/scratch.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/mc_readout/score_pages.h"
#include "kernels/mc_route/mc_route.h"
#include "kernels/mc_route/mc_route_math.h"

namespace mcserve::kernels::internal {
namespace {

constexpr int64_t kMinParallelMacs = 1 << 15;  // below this the pool costs more than it saves

}  // namespace

absl::Status McRouteCpu(const Context& ctx, const McRouteArgs& args) {
  const int64_t t = args.u->dim(0), hs = args.u->dim(1), k = args.u->dim(2), p = args.token_pages->dim(0);
  const int top_k = args.top_k;
  if (t == 0 || hs == 0) return absl::OkStatus();
  const float* u = Data<float>(*args.u);
  const int32_t* offsets = Data<int32_t>(*args.token_page_offsets);
  const int32_t* token_pages = Data<int32_t>(*args.token_pages);
  int32_t* selected = Data<int32_t>(*args.selected);
  std::vector<const float*> pooled;
  pooled.reserve(args.pooled_keys.size());
  for (const Tensor* key : args.pooled_keys) pooled.push_back(Data<float>(*key));
  int32_t max_n = 0;
  for (int64_t i = 0; i < t; ++i) max_n = std::max(max_n, offsets[i + 1] - offsets[i]);

  cpu::ThreadPool* pool = hs * p * std::max<int64_t>(k, 1) >= kMinParallelMacs ? ctx.pool : nullptr;
  cpu::ParallelFor(pool, t * hs, [&](int64_t begin, int64_t end) {
    const std::span<float> buffer = cpu::ThreadScratch(2 * max_n);  // scores, then the keep flags
    float* scores = buffer.data();
    unsigned char* keep = reinterpret_cast<unsigned char*>(buffer.data() + max_n);
    for (int64_t row = begin; row < end; ++row) {  // row = token · Hs + head
      const int64_t token = row / hs, h = row % hs;
      const int32_t e0 = offsets[token];
      const int32_t n = offsets[token + 1] - e0;
      ScorePages(u + row * k, pooled.data(), token_pages + e0, n, h * k, static_cast<int>(k), scores);
      mc_route_math::SelectTopK(scores, token_pages + e0, n, top_k, keep, selected + row * top_k);
    }
  });
  return absl::OkStatus();
}

}  // namespace mcserve::kernels::internal
