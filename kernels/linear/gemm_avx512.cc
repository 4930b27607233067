#include "kernels/linear/gemm_avx512.h"

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <span>
#include <type_traits>

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
// Each weight element is broadcast once per step c and met by every x vector. Step c also prefetches
// byte c·pf_step of `pf` (the next tile's stored weights), so they arrive while this tile computes.
template <int NIB, bool HALF, int R>
MCSERVE_AVX512 void Tile(const GemmXtArgs& a, const float* w, float* out, const char* pf, int64_t pf_step) {
  constexpr int kLanes = NIB * 16 + (HALF ? 8 : 0);
  const int64_t k = a.k;
  __m512 acc[NIB][R];
  __m256 acc_h[R];
  for (int r = 0; r < R; ++r) {
    for (int ib = 0; ib < NIB; ++ib) acc[ib][r] = _mm512_setzero_ps();
    if constexpr (HALF) acc_h[r] = _mm256_setzero_ps();
  }
  const float* xt = a.x;
  for (int64_t c = 0; c < k; ++c, xt += kLanes) {
    _mm_prefetch(pf + c * pf_step, _MM_HINT_T0);
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

// One tile of R weight rows w [R, k] (stored type T: float, or BF16 bits widened into wf [R, k]) into
// out[:, 0:R], prefetching the `next` rows after it.
template <int NIB, bool HALF, int R, class T>
MCSERVE_AVX512 void RunTile(const GemmXtArgs& a, const T* w, int64_t next, float* wf, float* out) {
  const float* rows = nullptr;
  if constexpr (std::is_same_v<T, float>) {
    rows = w;
  } else {
    WidenBf16(w, wf, R * a.k);
    rows = wf;
  }
  Tile<NIB, HALF, R>(a, rows, out, reinterpret_cast<const char*>(w + R * a.k),
                     next * static_cast<int64_t>(sizeof(T)));
}

// Output columns [j0, j1) from weight rows w [j1 - j0, k] (row j0 first; wf: RowsFor(...)·k floats
// for BF16): tiles of R rows, then the rest by 4 and by 1.
template <int NIB, bool HALF, class T>
MCSERVE_AVX512 void Columns(const GemmXtArgs& a, const T* w, float* wf, int64_t j0, int64_t j1) {
  constexpr int R = RowsFor(NIB + (HALF ? 1 : 0));
  const int64_t k = a.k;
  int64_t j = j0;
  auto rest = [&](int64_t rows, int64_t after) { return std::min<int64_t>(rows, j1 - after); };
  for (; j + R <= j1; j += R) RunTile<NIB, HALF, R>(a, w + (j - j0) * k, rest(R, j + R), wf, a.out + j);
  for (; j + 4 <= j1; j += 4) RunTile<NIB, HALF, 4>(a, w + (j - j0) * k, rest(4, j + 4), wf, a.out + j);
  for (; j < j1; ++j) RunTile<NIB, HALF, 1>(a, w + (j - j0) * k, rest(1, j + 1), wf, a.out + j);
}

// Columns for this m's lanes.
template <class T>
MCSERVE_AVX512 void ColumnsDispatch(const GemmXtArgs& a, const T* w, float* wf, int64_t j0, int64_t j1) {
  switch (GemmLanes(a.m) / 8) {
    case 2: return Columns<1, false>(a, w, wf, j0, j1);
    case 3: return Columns<1, true>(a, w, wf, j0, j1);
    case 4: return Columns<2, false>(a, w, wf, j0, j1);
    case 5: return Columns<2, true>(a, w, wf, j0, j1);
    case 6: return Columns<3, false>(a, w, wf, j0, j1);
    case 7: return Columns<3, true>(a, w, wf, j0, j1);
    case 8: return Columns<4, false>(a, w, wf, j0, j1);
  }
}

}  // namespace

int64_t GemmAvx512BlockRows(int64_t m) { return RowsFor(static_cast<int>((GemmLanes(m) + 15) / 16)); }

void GemmF32Avx512(const GemmXtArgs& a, const float* w, int64_t j0, int64_t j1) {
  ColumnsDispatch(a, w + j0 * a.k, nullptr, j0, j1);
}

void GemmBf16Avx512(const GemmXtArgs& a, const uint16_t* w, int64_t j0, int64_t j1) {
  // Each tile's rows are widened to F32 just before it runs, into an L1-sized thread buffer.
  const std::span<float> wf = cpu::ThreadScratch(static_cast<size_t>(GemmAvx512BlockRows(a.m) * a.k));
  ColumnsDispatch(a, w + j0 * a.k, wf.data(), j0, j1);
}

}  // namespace mcserve::kernels::internal
