// CPU HopeMemory, HopeFeatures and HopeMemWrite: tasks are (sequence, head) pairs run in parallel on ctx.pool; each runs its tokens
// in order through hope_memory_scan.h with a team of one thread and one scratch per pool chunk.
#include <cstdint>
#include <vector>

#include "kernels/cpu/scratch.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/hope_memory/hope_features.h"
#include "kernels/hope_memory/hope_mem_write.h"
#include "kernels/hope_memory/hope_memory.h"
#include "kernels/hope_memory/hope_memory_params.h"
#include "kernels/hope_memory/hope_memory_scan.h"

namespace mcserve::kernels::internal {

namespace {

// Every (sequence, head) of one call's scan.
absl::Status RunScan(const Context& ctx, const hope_memory_math::HopeScanParams& p, int64_t num_seqs) {
  namespace math = hope_memory_math;
  if (num_seqs == 0 || p.t == 0) return absl::OkStatus();
  cpu::ParallelFor(ctx.pool, num_seqs * p.heads, [&](int64_t begin, int64_t end) {
    const std::span<float> scratch = cpu::ThreadScratch(math::HopeScratchFloats(p.d, p.e));
    for (int64_t task = begin; task < end; ++task) {
      math::ScanHead(p, task / p.heads, task % p.heads, scratch.data(), math::SoloTeam{});
    }
  });
  return absl::OkStatus();
}

}  // namespace

absl::Status HopeMemoryCpu(const Context& ctx, const HopeMemoryArgs& args) {
  return RunScan(ctx, hope_memory_math::MakeScanParams(args), args.layout.slot_ids->dim(0));
}

absl::Status HopeFeaturesCpu(const Context& ctx, const HopeFeaturesArgs& args) {
  return RunScan(ctx, hope_memory_math::MakeScanParams(args), args.layout.slot_ids->dim(0));
}

absl::Status HopeMemWriteCpu(const Context& ctx, const HopeMemWriteArgs& args) {
  return RunScan(ctx, hope_memory_math::MakeScanParams(args), args.layout.slot_ids->dim(0));
}

}  // namespace mcserve::kernels::internal
