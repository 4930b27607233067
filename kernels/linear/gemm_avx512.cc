#include "kernels/linear/gemm_avx512.h"

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <span>

#include "kernels/cpu/scratch.h"

namespace mcserve::kernels::internal {
namespace {

#define MCSERVE_AVX512 __attribute__((target("avx512f,avx512bw")))

// Weight rows per block for `blocks` vectors of batch rows: blocks·R accumulators + the x vectors + a
// broadcast within the 32 zmm.
constexpr int RowsFor(int blocks) { return blocks <= 2 ? 12 : blocks == 3 ? 8 : 6; }

// out[i, r] (+)= Σ_c x[i, c] · w[r, c] for i < m, r < R: w rows [R, k] at stride k, xt [k, lanes] with
// lanes = 16·NIB + 8·HALF. Accumulators hold 16 batch rows each (acc[ib][r] lane l = out[16·ib + l, r]),
// and with HALF one 8-row ymm more (m ≤ 8 past a multiple of 16 costs half a zmm FMA, not a whole one).
// Each weight element is broadcast once per step c and met by every x vector.
template <int NIB, bool HALF, int R>
MCSERVE_AVX512 void Tile(const GemmAvx512Args& a, const float* w, float* out) {
  constexpr int kLanes = NIB * 16 + (HALF ? 8 : 0);
  const int64_t k = a.k;
  __m512 acc[NIB][R];
  __m256 acc_h[R];
  for (int r = 0; r < R; ++r) {
    for (int ib = 0; ib < NIB; ++ib) acc[ib][r] = _mm512_setzero_ps();
    if constexpr (HALF) acc_h[r] = _mm256_setzero_ps();
  }
  const float* xt = a.xt;
  for (int64_t c = 0; c < k; ++c, xt += kLanes) {
    __m512 xv[NIB];
    for (int ib = 0; ib < NIB; ++ib) xv[ib] = _mm512_loadu_ps(xt + 16 * ib);
    __m256 xh;
    if constexpr (HALF) xh = _mm256_loadu_ps(xt + 16 * NIB);
    for (int r = 0; r < R; ++r) {
      const float wv = w[r * k + c];
      const __m512 wb = _mm512_set1_ps(wv);
      for (int ib = 0; ib < NIB; ++ib) acc[ib][r] = _mm512_fmadd_ps(xv[ib], wb, acc[ib][r]);
      if constexpr (HALF) acc_h[r] = _mm256_fmadd_ps(xh, _mm256_set1_ps(wv), acc_h[r]);
    }
  }
  alignas(64) float tile[R][kLanes];  // tile[r, i] = the sum for out[i, r]
  for (int r = 0; r < R; ++r) {
    for (int ib = 0; ib < NIB; ++ib) _mm512_storeu_ps(&tile[r][16 * ib], acc[ib][r]);
    if constexpr (HALF) _mm256_storeu_ps(&tile[r][16 * NIB], acc_h[r]);
  }
  for (int64_t i = 0; i < a.m; ++i) {
    float* o = out + i * a.n;
    for (int r = 0; r < R; ++r) o[r] = a.accumulate ? o[r] + tile[r][i] : tile[r][i];
  }
}

// Output columns [j0, j1) from weight rows w [j1 - j0, k] (row j0 first): blocks of R, then the
// rest by 4 and by 1.
template <int NIB, bool HALF>
MCSERVE_AVX512 void Columns(const GemmAvx512Args& a, const float* w, int64_t j0, int64_t j1) {
  constexpr int R = RowsFor(NIB + (HALF ? 1 : 0));
  int64_t j = j0;
  for (; j + R <= j1; j += R) Tile<NIB, HALF, R>(a, w + (j - j0) * a.k, a.out + j);
  for (; j + 4 <= j1; j += 4) Tile<NIB, HALF, 4>(a, w + (j - j0) * a.k, a.out + j);
  for (; j < j1; ++j) Tile<NIB, HALF, 1>(a, w + (j - j0) * a.k, a.out + j);
}

MCSERVE_AVX512 void ColumnsDispatch(const GemmAvx512Args& a, const float* w, int64_t j0, int64_t j1) {
  switch (GemmAvx512Lanes(a.m) / 8) {
    case 2: return Columns<1, false>(a, w, j0, j1);
    case 3: return Columns<1, true>(a, w, j0, j1);
    case 4: return Columns<2, false>(a, w, j0, j1);
    case 5: return Columns<2, true>(a, w, j0, j1);
    case 6: return Columns<3, false>(a, w, j0, j1);
    case 7: return Columns<3, true>(a, w, j0, j1);
    case 8: return Columns<4, false>(a, w, j0, j1);
  }
}

// dst [count] = src [count] BF16 bits widened exactly to F32 (the bits shifted into the high half).
MCSERVE_AVX512 void WidenBf16(const uint16_t* src, float* dst, int64_t count) {
  constexpr __mmask16 kAll = 0xffff;  // the maskz forms: GCC 12 warns on the unmasked ones
  int64_t i = 0;
  for (; i + 16 <= count; i += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    const __m512i wide = _mm512_maskz_slli_epi32(kAll, _mm512_maskz_cvtepu16_epi32(kAll, h), 16);
    _mm512_storeu_ps(dst + i, _mm512_castsi512_ps(wide));
  }
  for (; i < count; ++i) dst[i] = std::bit_cast<float>(static_cast<uint32_t>(src[i]) << 16);
}

}  // namespace

void TransposeForGemmAvx512(const float* x, int64_t m, int64_t k, float* xt) {
  const int64_t lanes = GemmAvx512Lanes(m);
  for (int64_t c = 0; c < k; ++c) {
    for (int64_t i = 0; i < m; ++i) xt[c * lanes + i] = x[i * k + c];
    for (int64_t i = m; i < lanes; ++i) xt[c * lanes + i] = 0.0f;
  }
}

int64_t GemmAvx512BlockRows(int64_t m) { return RowsFor(static_cast<int>((GemmAvx512Lanes(m) + 15) / 16)); }

void GemmF32Avx512(const GemmAvx512Args& a, const float* w, int64_t j0, int64_t j1) {
  ColumnsDispatch(a, w + j0 * a.k, j0, j1);
}

void GemmBf16Avx512(const GemmAvx512Args& a, const uint16_t* w, int64_t j0, int64_t j1) {
  // Blocks of weight rows widened to F32 in about 16 KiB (L1) of thread scratch, each run at once.
  const int64_t rows = GemmAvx512BlockRows(a.m);
  const int64_t block = std::max<int64_t>(1, (4096 / a.k) / rows) * rows;
  const std::span<float> wf = cpu::ThreadScratch(static_cast<size_t>(std::min(block, j1 - j0) * a.k));
  for (int64_t b = j0; b < j1; b += block) {
    const int64_t e = std::min(j1, b + block);
    WidenBf16(w + b * a.k, wf.data(), (e - b) * a.k);
    ColumnsDispatch(a, wf.data(), b, e);
  }
}

}  // namespace mcserve::kernels::internal
