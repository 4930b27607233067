// CPU ShortConv: tasks are (sequence, block of channels) pairs; within a task the tokens run in
// order and the innermost loop runs over contiguous channels, so it vectorises.
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/core/tensor_data.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/short_conv/short_conv.h"
#include "kernels/short_conv/short_conv_math.h"

namespace mcserve::kernels::internal {
namespace {

constexpr int64_t kChannelBlock = 64;

// Widens a F32/BF16/F16 tensor into `out`.
void ToFloat(const Tensor& t, std::vector<float>& out) {
  out.resize(t.numel());
  if (t.dtype() == DType::kF32) {
    std::memcpy(out.data(), Data<float>(t), out.size() * sizeof(float));
    return;
  }
  const uint16_t* p = Data<uint16_t>(t);
  const bool bf16 = t.dtype() == DType::kBF16;
  for (size_t i = 0; i < out.size(); ++i) out[i] = bf16 ? Bf16ToF32(p[i]) : F16ToF32(p[i]);
}

}  // namespace

absl::Status ShortConvCpu(const Context& ctx, const ShortConvArgs& args) {
  const Tensor& x = *args.x;
  const int64_t d = x.dim(1);
  const int width = static_cast<int>(args.weight->dim(2));
  const int hist = width - 1;
  const int64_t num_seqs = args.layout.slot_ids->dim(0);
  if (num_seqs == 0 || d == 0) return absl::OkStatus();

  // Weight transposed to [W, D] so tap j of every channel is contiguous.
  std::vector<float> w_raw, wt(static_cast<size_t>(width) * d), bias(d, 0.0f);
  ToFloat(*args.weight, w_raw);
  for (int64_t c = 0; c < d; ++c) {
    for (int j = 0; j < width; ++j) wt[j * d + c] = w_raw[c * width + j];
  }
  if (args.bias != nullptr) ToFloat(*args.bias, bias);

  const int32_t* cu = Data<int32_t>(*args.layout.cu_seqlens);
  const int32_t* slots = Data<int32_t>(*args.layout.slot_ids);
  const float* xd = Data<float>(x);
  float* od = Data<float>(*args.out);
  float* sd = Data<float>(*args.state);
  const bool silu = args.silu;
  const int64_t num_blocks = (d + kChannelBlock - 1) / kChannelBlock;

  cpu::ParallelFor(ctx.pool, num_seqs * num_blocks, [&](int64_t begin, int64_t end) {
    float acc[kChannelBlock];
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / num_blocks;
      const int64_t c0 = (task % num_blocks) * kChannelBlock;
      const int64_t nc = std::min(kChannelBlock, d - c0);
      const int64_t len = cu[b + 1] - cu[b];
      const float* xs = xd + static_cast<int64_t>(cu[b]) * d;
      float* os = od + static_cast<int64_t>(cu[b]) * d;
      float* st = sd + static_cast<int64_t>(slots[b]) * hist * d;
      for (int64_t t = 0; t < len; ++t) {
        for (int64_t c = 0; c < nc; ++c) acc[c] = 0.0f;
        for (int j = 0; j < width; ++j) {
          const float* src = ShortConvSourceRow(st, xs, t - hist + j, width, d) + c0;
          const float* wj = wt.data() + j * d + c0;
          for (int64_t c = 0; c < nc; ++c) acc[c] += wj[c] * src[c];
        }
        float* o = os + t * d + c0;
        for (int64_t c = 0; c < nc; ++c) o[c] = ShortConvFinish(acc[c], bias[c0 + c], silu);
      }
      // New history: the last W−1 inputs of (old history ++ this chunk), oldest first.
      if (hist == 0 || len == 0) continue;
      const int64_t keep = std::max<int64_t>(hist - len, 0);  // old rows that survive
      for (int64_t i = 0; i < keep; ++i) {
        std::memmove(st + i * d + c0, st + (i + len) * d + c0, nc * sizeof(float));
      }
      for (int64_t i = keep; i < hist; ++i) {
        std::memcpy(st + i * d + c0, xs + (len - hist + i) * d + c0, nc * sizeof(float));
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace mcserve::kernels::internal
