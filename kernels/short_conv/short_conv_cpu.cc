// CPU ShortConv: tasks are (sequence, block of channels) pairs; within a task the tokens run in
// order and the innermost loop runs over contiguous channels, so it vectorises.
#include <algorithm>

#include "kernels/core/tensor_data.h"
#include "kernels/cpu/scratch.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/short_conv/short_conv.h"
#include "kernels/short_conv/short_conv_rows_cpu.h"

namespace mcserve::kernels::internal {
namespace {

constexpr int64_t kChannelBlock = kShortConvMaxChannels;
// (token, channel) pairs below which the conv runs on the calling thread: a decode token's conv (a few
// µs) costs about what a pool hand-off does, and the worker would wait for the caller either way.
constexpr int64_t kMinParallelElements = 1 << 12;

// One (sequence, channel block) task: convolves the sequence's tokens, then updates its history.
struct BlockTask {
  const ShortConvArgs& args;
  int64_t d;
  int width;
  const int32_t* cu;
  const int32_t* slots;
  int64_t num_seqs;

  // Asks for sequence b's history rows of this channel block: the task for (b, c0) runs
  // ceil(D / kChannelBlock) tasks later, and a batch's slots sit apart in memory.
  void PrefetchHistory(int64_t b, int64_t c0, int64_t nc) const {
    const float* st = Data<float>(*args.state) + static_cast<int64_t>(slots[b]) * (width - 1) * d + c0;
    for (int i = 0; i < width - 1; ++i) {
      for (int64_t c = 0; c < nc; c += 16) _mm_prefetch(reinterpret_cast<const char*>(st + i * d + c), _MM_HINT_T0);
    }
  }

  void Run(int64_t b, int64_t c0, const ShortConvTaps& w) const {
    const int64_t nc = std::min(kChannelBlock, d - c0);
    const int64_t len = cu[b + 1] - cu[b];
    const float* xs = Data<float>(*args.x) + static_cast<int64_t>(cu[b]) * d;
    float* os = Data<float>(*args.out) + static_cast<int64_t>(cu[b]) * d;
    float* st = Data<float>(*args.state) + static_cast<int64_t>(slots[b]) * (width - 1) * d;
    if (b + 1 < num_seqs) PrefetchHistory(b + 1, c0, nc);
    ShortConvChannels(w, xs, len, st, d, width, c0, nc, args.silu, os);
  }
};

}  // namespace

absl::Status ShortConvCpu(const Context& ctx, const ShortConvArgs& args) {
  const int64_t d = args.x->dim(1);
  const int width = static_cast<int>(args.weight->dim(2));
  const int64_t num_seqs = args.layout.slot_ids->dim(0);
  if (num_seqs == 0 || d == 0) return absl::OkStatus();
  const BlockTask task{.args = args, .d = d, .width = width, .cu = Data<int32_t>(*args.layout.cu_seqlens),
                       .slots = Data<int32_t>(*args.layout.slot_ids), .num_seqs = num_seqs};
  const int64_t num_blocks = (d + kChannelBlock - 1) / kChannelBlock;
  // The taps in the calling thread's op scratch: once per call, not per task.
  cpu::ScratchCarver scratch(cpu::OpScratchForOverwrite(ShortConvTapsFloats(d, width)));
  const ShortConvTaps w = LoadShortConvTaps(args, d, width, scratch);
  const int64_t tokens = task.cu[num_seqs] - task.cu[0];
  cpu::ThreadPool* pool = tokens * d >= kMinParallelElements ? ctx.pool : nullptr;
  cpu::ParallelFor(pool, num_seqs * num_blocks, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) task.Run(i / num_blocks, (i % num_blocks) * kChannelBlock, w);
  });
  return absl::OkStatus();
}

}  // namespace mcserve::kernels::internal
