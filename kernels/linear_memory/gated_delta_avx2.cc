#include "kernels/linear_memory/gated_delta_avx2.h"

#include <immintrin.h>

#include <cstdint>

namespace mcserve::kernels::internal {
namespace {

constexpr int kLine = 64;
constexpr int kChunk = 32;  // columns per chunk: 4 ymm of u and 4 of o

// GatedDeltaStep on columns [c0, c0 + 32) of t.S [K, V]. Pass 1 forms u = Σ_i k_i (α S_i) row by row
// (the decayed row is not stored); pass 2 rewrites S_i = α S_i + k_i u and accumulates o = Σ_i q_i S_i.
// The α S_i product, the FMAs and their order per output element are those of the generic step.
// Pass 1 asks for `per_row` bytes of `next` per row.
void Chunk(const GatedDeltaToken& t, int c0, const char* next, int per_row) {
  constexpr int NV = kChunk / 8;
  const __m256 a = _mm256_set1_ps(t.alpha);
  __m256 u[NV];
  for (int c = 0; c < NV; ++c) u[c] = _mm256_setzero_ps();
  for (int i = 0; i < t.K; ++i) {
    const float* row = t.S + static_cast<int64_t>(i) * t.V + c0;
    for (int p = 0; next != nullptr && p < per_row; p += kLine) _mm_prefetch(next + i * per_row + p, _MM_HINT_T0);
    const __m256 ki = _mm256_set1_ps(t.k[i]);
    for (int c = 0; c < NV; ++c) u[c] = _mm256_fmadd_ps(ki, _mm256_mul_ps(_mm256_loadu_ps(row + 8 * c), a), u[c]);
  }
  const __m256 b = _mm256_set1_ps(t.beta);
  for (int c = 0; c < NV; ++c) u[c] = _mm256_mul_ps(b, _mm256_sub_ps(_mm256_loadu_ps(t.v + c0 + 8 * c), u[c]));
  __m256 acc[NV];
  for (int c = 0; c < NV; ++c) acc[c] = _mm256_setzero_ps();
  for (int i = 0; i < t.K; ++i) {
    float* row = t.S + static_cast<int64_t>(i) * t.V + c0;
    const __m256 ki = _mm256_set1_ps(t.k[i]), qi = _mm256_set1_ps(t.q[i]);
    for (int c = 0; c < NV; ++c) {
      const __m256 r = _mm256_fmadd_ps(ki, u[c], _mm256_mul_ps(_mm256_loadu_ps(row + 8 * c), a));
      _mm256_storeu_ps(row + 8 * c, r);
      acc[c] = _mm256_fmadd_ps(qi, r, acc[c]);
    }
  }
  for (int c = 0; c < NV; ++c) _mm256_storeu_ps(t.o + c0 + 8 * c, acc[c]);
}

}  // namespace

void GatedDeltaStepAvx2(const GatedDeltaToken& t) {
  const int chunks = t.V / kChunk;
  // `next`'s lines are spread over every chunk's pass 1, one share per row.
  const int per_row = (t.prefetch_bytes + t.K * chunks - 1) / (t.K * chunks);
  const char* n = reinterpret_cast<const char*>(t.next);
  for (int ch = 0; ch < chunks; ++ch) {
    Chunk(t, ch * kChunk, n == nullptr ? nullptr : n + ch * t.K * per_row, per_row);
  }
}

}  // namespace mcserve::kernels::internal
