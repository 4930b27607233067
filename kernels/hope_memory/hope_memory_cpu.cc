// CPU HopeMemory: tasks are (sequence, head) pairs run in parallel on ctx.pool; each runs its tokens
// in order through hope_memory_scan.h with a team of one thread and one scratch per pool chunk.
#include <cstdint>
#include <vector>

#include "kernels/cpu/thread_pool.h"
#include "kernels/hope_memory/hope_memory.h"
#include "kernels/hope_memory/hope_memory_params.h"
#include "kernels/hope_memory/hope_memory_scan.h"

namespace mcserve::kernels::internal {

absl::Status HopeMemoryCpu(const Context& ctx, const HopeMemoryArgs& args) {
  namespace math = hope_memory_math;
  const int64_t num_seqs = args.layout.slot_ids->dim(0);
  const math::HopeScanParams p = math::MakeScanParams(args);
  if (num_seqs == 0 || p.t == 0) return absl::OkStatus();
  cpu::ParallelFor(ctx.pool, num_seqs * p.heads, [&](int64_t begin, int64_t end) {
    std::vector<float> scratch(math::HopeScratchFloats(p.d, p.e));
    for (int64_t task = begin; task < end; ++task) {
      math::ScanHead(p, task / p.heads, task % p.heads, scratch.data(), math::SoloTeam{});
    }
  });
  return absl::OkStatus();
}

}  // namespace mcserve::kernels::internal
