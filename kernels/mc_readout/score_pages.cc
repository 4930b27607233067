// Four dot products at a time (four pages against one gate input, or one page's four heads against
// theirs): their sums are independent, so the adds of four chains overlap where Dot's one chain waits
// on each add (at 64K tokens a token scores 256 pages per head per layer). Each keeps Dot's 8 lanes
// (one ymm register, AVX2: the kernels' baseline) and order.
#include "kernels/mc_readout/score_pages.h"

#include <immintrin.h>

#include "kernels/mc_readout/mc_readout_math.h"

namespace mcserve::kernels::internal {
namespace {

namespace math = mc_readout_math;

constexpr int kChains = 4;          // dot products computed together
constexpr int kLanes = 8;           // Dot's partial sums
constexpr int32_t kPagesAhead = 4;  // pooled keys fetched this many pages ahead

// Asks for the cache lines of row [n] floats ahead of its use.
inline void PrefetchRow(const float* row, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) __builtin_prefetch(row + i);
}

// out[c] = math::Dot(a[c], b[c], k) for c < kChains.
inline void DotChains(const float* const* a, const float* const* b, int k, float* out, int64_t out_stride) {
  __m256 acc[kChains];  // [kChains] × Dot's kLanes partial sums
  for (__m256& x : acc) x = _mm256_setzero_ps();
  int j = 0;
  for (; j + kLanes <= k; j += kLanes) {
    for (int c = 0; c < kChains; ++c) {
      acc[c] = _mm256_add_ps(acc[c], _mm256_mul_ps(_mm256_loadu_ps(a[c] + j), _mm256_loadu_ps(b[c] + j)));
    }
  }
  for (int c = 0; c < kChains; ++c) {
    alignas(32) float lanes[kLanes];
    _mm256_store_ps(lanes, acc[c]);
    float s = math::SumLanes(lanes);
    for (int r = j; r < k; ++r) s += a[c][r] * b[c][r];
    out[c * out_stride] = s;
  }
}

}  // namespace

void ScorePages(const float* u, const float* const* pooled, const int32_t* list, int32_t n, int64_t offset, int k,
                float* scores) {
  const float* const us[kChains] = {u, u, u, u};
  int32_t i = 0;
  for (; i + kChains <= n; i += kChains) {
    const float* key[kChains];
    for (int c = 0; c < kChains; ++c) {
      key[c] = pooled[list[i + c]] + offset;
      if (i + c + kPagesAhead < n) PrefetchRow(pooled[list[i + c + kPagesAhead]] + offset, k);
    }
    DotChains(us, key, k, scores + i, 1);
  }
  for (; i < n; ++i) scores[i] = math::Dot(u, pooled[list[i]] + offset, k);
}

void ScorePageHeads(const float* u, const float* const* pooled, const int32_t* list, int32_t n, int64_t hs, int k,
                    float* scores, int64_t stride) {
  for (int32_t i = 0; i < n; ++i) {
    if (i + kPagesAhead < n) PrefetchRow(pooled[list[i + kPagesAhead]], hs * k);
    const float* key = pooled[list[i]];
    int64_t h = 0;
    for (; h + kChains <= hs; h += kChains) {
      const float* a[kChains];
      const float* b[kChains];
      for (int c = 0; c < kChains; ++c) {
        a[c] = u + (h + c) * k;
        b[c] = key + (h + c) * k;
      }
      DotChains(a, b, k, scores + h * stride + i, stride);
    }
    for (; h < hs; ++h) scores[h * stride + i] = math::Dot(u + h * k, key + h * k, k);
  }
}

}  // namespace mcserve::kernels::internal
