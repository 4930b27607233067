// CPU ShortConv: tasks are (sequence, block of channels) pairs; within a task the tokens run in
// order and the innermost loop runs over contiguous channels, so it vectorises.
#include <algorithm>
#include <cstring>

#include "kernels/core/tensor_data.h"
#include "kernels/cpu/scratch.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cpu/vec_math.h"
#include "kernels/short_conv/short_conv.h"
#include "kernels/short_conv/short_conv_math.h"

namespace mcserve::kernels::internal {
namespace {

constexpr int64_t kChannelBlock = 64;
// (token, channel) pairs below which the conv runs on the calling thread: a decode token's conv (a few
// µs) costs about what a pool hand-off does, and the worker would wait for the caller either way.
constexpr int64_t kMinParallelElements = 1 << 12;

// o [n] = ShortConvFinish(acc, bias, silu) per channel; acc, bias: [n]. SiLU runs 8 channels at a time.
void Finish(const float* acc, const float* bias, int64_t n, bool silu, float* o) {
  if (!silu) {
    for (int64_t c = 0; c < n; ++c) o[c] = ShortConvFinish(acc[c], bias[c], false);
    return;
  }
  cpu::vec::ForEach8(
      0, n,
      [&](int64_t c) {
        const __m256 y = _mm256_add_ps(_mm256_loadu_ps(acc + c), _mm256_loadu_ps(bias + c));
        _mm256_storeu_ps(o + c, cpu::vec::SiluDiv(y));
      },
      [&](int64_t c) { o[c] = ShortConvFinish(acc[c], bias[c], true); });
}

// The weight [D, 1, W] widened and transposed to taps [W, D] (tap j of every channel contiguous) and
// the bias [D] (0 without one), in the calling thread's op scratch: once per call, not per task.
// Every element is written before it is read, so the scratch is not zeroed first (a decode token's
// three convs zeroed 90 KB for 12 KB of taps).
struct Taps {
  std::span<float> taps, bias;
};
Taps LoadTaps(const ShortConvArgs& args, int64_t d, int width) {
  cpu::ScratchCarver c(cpu::OpScratchForOverwrite(static_cast<size_t>(2 * width + 2) * d));
  Taps t{.taps = c.Take(static_cast<size_t>(width) * d), .bias = c.Take(d)};
  TransposedF32(*args.weight, d, width, c.Take(static_cast<size_t>(width) * d), t.taps);  // [D, W] -> [W, D]
  if (args.bias != nullptr) {
    const float* b = F32View(*args.bias, c.Take(d));
    std::copy(b, b + d, t.bias.begin());
  } else {
    std::fill(t.bias.begin(), t.bias.end(), 0.0f);
  }
  return t;
}

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

  void Run(int64_t b, int64_t c0, const Taps& w) const {
    const int hist = width - 1;
    const int64_t nc = std::min(kChannelBlock, d - c0);
    const int64_t len = cu[b + 1] - cu[b];
    const float* xs = Data<float>(*args.x) + static_cast<int64_t>(cu[b]) * d;
    float* os = Data<float>(*args.out) + static_cast<int64_t>(cu[b]) * d;
    float* st = Data<float>(*args.state) + static_cast<int64_t>(slots[b]) * hist * d;
    if (b + 1 < num_seqs) PrefetchHistory(b + 1, c0, nc);
    float acc[kChannelBlock];
    for (int64_t t = 0; t < len; ++t) {
      for (int64_t c = 0; c < nc; ++c) acc[c] = 0.0f;
      for (int j = 0; j < width; ++j) {
        const float* src = ShortConvSourceRow(st, xs, t - hist + j, width, d) + c0;
        const float* wj = w.taps.data() + j * d + c0;
        for (int64_t c = 0; c < nc; ++c) acc[c] += wj[c] * src[c];
      }
      Finish(acc, w.bias.data() + c0, nc, args.silu, os + t * d + c0);
    }
    // New history: the last W−1 inputs of (old history ++ this chunk), oldest first.
    if (hist == 0 || len == 0) return;
    const int64_t keep = std::max<int64_t>(hist - len, 0);  // old rows that survive
    for (int64_t i = 0; i < keep; ++i) std::memmove(st + i * d + c0, st + (i + len) * d + c0, nc * sizeof(float));
    for (int64_t i = keep; i < hist; ++i) {
      std::memcpy(st + i * d + c0, xs + (len - hist + i) * d + c0, nc * sizeof(float));
    }
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
  const Taps w = LoadTaps(args, d, width);
  const int64_t tokens = task.cu[num_seqs] - task.cu[0];
  cpu::ThreadPool* pool = tokens * d >= kMinParallelElements ? ctx.pool : nullptr;
  cpu::ParallelFor(pool, num_seqs * num_blocks, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) task.Run(i / num_blocks, (i % num_blocks) * kChannelBlock, w);
  });
  return absl::OkStatus();
}

}  // namespace mcserve::kernels::internal
