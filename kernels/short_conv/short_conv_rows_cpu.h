// The CPU short conv's pieces, shared by ShortConv (short_conv_cpu.cc) and the fused decode step of
// DeltaDecode (kernels/delta_decode/), so both compute every channel with the same code, bit for bit.
// CPU files only (AVX2 and FMA). Any thread.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>

#include "kernels/core/tensor_data.h"
#include "kernels/cpu/scratch.h"
#include "kernels/cpu/vec_math.h"
#include "kernels/short_conv/short_conv.h"
#include "kernels/short_conv/short_conv_math.h"

namespace mcserve::kernels::internal {

// o [n] = ShortConvFinish(acc, bias, silu) per channel; acc, bias: [n], bias null for zeros (the same
// sums: 0 is still added). SiLU runs 8 channels at a time.
inline void ShortConvFinishRow(const float* acc, const float* bias, int64_t n, bool silu, float* o) {
  const auto b = [&](int64_t c) { return bias != nullptr ? bias[c] : 0.0f; };
  if (!silu) {
    for (int64_t c = 0; c < n; ++c) o[c] = ShortConvFinish(acc[c], b(c), false);
    return;
  }
  cpu::vec::ForEach8(
      0, n,
      [&](int64_t c) {
        const __m256 bc = bias != nullptr ? _mm256_loadu_ps(bias + c) : _mm256_setzero_ps();
        const __m256 y = _mm256_add_ps(_mm256_loadu_ps(acc + c), bc);
        _mm256_storeu_ps(o + c, cpu::vec::SiluDiv(y));
      },
      [&](int64_t c) { o[c] = ShortConvFinish(acc[c], b(c), true); });
}

// The weight [D, 1, W] widened and transposed to taps [W, D] (tap j of every channel contiguous) and
// the bias [D] (empty: zeros).
struct ShortConvTaps {
  std::span<const float> taps, bias;  // [W, D], [D] or empty
};

// Floats LoadShortConvTaps carves for a conv of D channels and width W.
inline size_t ShortConvTapsFloats(int64_t d, int width) { return static_cast<size_t>(2 * width + 2) * d; }

// Loads args' weight and bias into ShortConvTaps carved from `c` (ShortConvTapsFloats of it). Every
// element is written before it is read, so the scratch need not be zeroed.
inline ShortConvTaps LoadShortConvTaps(const ShortConvArgs& args, int64_t d, int width, cpu::ScratchCarver& c) {
  const std::span<float> taps = c.Take(static_cast<size_t>(width) * d), bias = c.Take(d);
  TransposedF32(*args.weight, d, width, c.Take(static_cast<size_t>(width) * d), taps);  // [D, W] -> [W, D]
  if (args.bias != nullptr) {
    const float* b = F32View(*args.bias, c.Take(d));
    std::copy(b, b + d, bias.begin());
  } else {
    std::fill(bias.begin(), bias.end(), 0.0f);
  }
  return {.taps = taps, .bias = bias};
}

// The most channels one ShortConvChannels call takes (its accumulators live on the stack).
inline constexpr int64_t kShortConvMaxChannels = 64;

// Channels [c0, c0 + nc) (nc <= kShortConvMaxChannels) of one sequence's `len` tokens: convolves xs [len, D] with its
// history st [W−1, D] (its state slot) into os [len, D], then makes st the last W−1 inputs.
inline void ShortConvChannels(const ShortConvTaps& w, const float* xs, int64_t len, float* st, int64_t d, int width,
                              int64_t c0, int64_t nc, bool silu, float* os) {
  const int hist = width - 1;
  float acc[kShortConvMaxChannels];
  for (int64_t t = 0; t < len; ++t) {
    for (int64_t c = 0; c < nc; ++c) acc[c] = 0.0f;
    for (int j = 0; j < width; ++j) {
      const float* src = ShortConvSourceRow(st, xs, t - hist + j, width, d) + c0;
      const float* wj = w.taps.data() + j * d + c0;
      for (int64_t c = 0; c < nc; ++c) acc[c] += wj[c] * src[c];
    }
    ShortConvFinishRow(acc, w.bias.empty() ? nullptr : w.bias.data() + c0, nc, silu, os + t * d + c0);
  }
  // New history: the last W−1 inputs of (old history ++ this chunk), oldest first.
  if (hist == 0 || len == 0) return;
  const int64_t keep = std::max<int64_t>(hist - len, 0);  // old rows that survive
  for (int64_t i = 0; i < keep; ++i) std::memmove(st + i * d + c0, st + (i + len) * d + c0, nc * sizeof(float));
  for (int64_t i = keep; i < hist; ++i) {
    std::memcpy(st + i * d + c0, xs + (len - hist + i) * d + c0, nc * sizeof(float));
  }
}

}  // namespace mcserve::kernels::internal
