#include "kernels/linear_memory/gated_delta_avx512.h"

#include <immintrin.h>

#include <cstdint>


namespace mcserve::kernels::internal {
namespace {

#define MCSERVE_AVX512 __attribute__((target("avx512f,avx512bw")))

constexpr int kLine = 64;

// GatedDeltaStep for V = 16·NV. Pass 1 forms u = Σ_i k_i (α S_i) row by row (the decayed row is not
// stored); pass 2 rewrites S_i = α S_i + k_i u and accumulates o = Σ_i q_i S_i. The α S_i product, the
// FMAs and their order per output element are those of the generic step. `next`'s lines are asked for
// spread over pass 1, one row's worth per row.
template <int NV>
MCSERVE_AVX512 void Step(const GatedDeltaToken& t) {
  constexpr int V = 16 * NV;
  float* S = t.S;
  const float *q = t.q, *k = t.k, *v = t.v;
  const float alpha = t.alpha, beta = t.beta;
  const int K = t.K, prefetch_bytes = t.prefetch_bytes;
  float* o = t.o;
  const char* next = reinterpret_cast<const char*>(t.next);
  const __m512 a = _mm512_set1_ps(alpha);
  __m512 u[NV];
  for (int c = 0; c < NV; ++c) u[c] = _mm512_setzero_ps();
  const int per_row = (prefetch_bytes + K - 1) / K;  // bytes of `next` asked for per row
  for (int i = 0; i < K; ++i) {
    const float* row = S + static_cast<int64_t>(i) * V;
    for (int p = 0; next != nullptr && p < per_row; p += kLine) _mm_prefetch(next + i * per_row + p, _MM_HINT_T0);
    const __m512 ki = _mm512_set1_ps(k[i]);
    for (int c = 0; c < NV; ++c) u[c] = _mm512_fmadd_ps(ki, _mm512_mul_ps(_mm512_loadu_ps(row + 16 * c), a), u[c]);
  }
  const __m512 b = _mm512_set1_ps(beta);
  for (int c = 0; c < NV; ++c) u[c] = _mm512_mul_ps(b, _mm512_sub_ps(_mm512_loadu_ps(v + 16 * c), u[c]));
  __m512 acc[NV];
  for (int c = 0; c < NV; ++c) acc[c] = _mm512_setzero_ps();
  for (int i = 0; i < K; ++i) {
    float* row = S + static_cast<int64_t>(i) * V;
    const __m512 ki = _mm512_set1_ps(k[i]), qi = _mm512_set1_ps(q[i]);
    for (int c = 0; c < NV; ++c) {
      const __m512 r = _mm512_fmadd_ps(ki, u[c], _mm512_mul_ps(_mm512_loadu_ps(row + 16 * c), a));
      _mm512_storeu_ps(row + 16 * c, r);
      acc[c] = _mm512_fmadd_ps(qi, r, acc[c]);
    }
  }
  for (int c = 0; c < NV; ++c) _mm512_storeu_ps(o + 16 * c, acc[c]);
}

}  // namespace

void GatedDeltaStepAvx512(const GatedDeltaToken& t) {
  switch (t.V) {
    case 32: return Step<2>(t);
    case 64: return Step<4>(t);
    case 128: return Step<8>(t);
  }
}

}  // namespace mcserve::kernels::internal
