// Stored weight element types as the AVX2 kernels read them (the GEMV's blocks, the small-m GEMM's
// widening): eight elements widened exactly to an F32 ymm, and one for tails. Any thread.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/linear/linear_math.h"

namespace mcserve::kernels::internal {

// F32 weights: read as they are.
struct F32W {
  using T = float;
  static __m256 Load8(const float* p) { return _mm256_loadu_ps(p); }
  static float One(float v) { return linear_math::WeightToF32(v); }
};

// BF16 weights (bits): shifted into the high half of an F32.
struct Bf16W {
  using T = uint16_t;
  static __m256 Load8(const uint16_t* p) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static float One(uint16_t v) { return linear_math::Bf16WeightToF32(v); }
};

// F16 weights (bits): converted by F16C.
struct F16W {
  using T = uint16_t;
  static __m256 Load8(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static float One(uint16_t v) { return linear_math::F16WeightToF32(v); }
};

// dst [count] = src [count] widened to F32.
template <class W>
void WidenRows(const typename W::T* src, float* dst, int64_t count) {
  int64_t i = 0;
  for (; i + 8 <= count; i += 8) _mm256_storeu_ps(dst + i, W::Load8(src + i));
  for (; i < count; ++i) dst[i] = W::One(src[i]);
}

}  // namespace mcserve::kernels::internal
