#include "kernels/linear/gemv_bf16_avx512.h"

#include <immintrin.h>

#include "kernels/cpu/in_register.h"
#include "kernels/linear/avx512_columns.h"
#include "kernels/linear/gemv_prefetch.h"

namespace mcserve::kernels::internal {
namespace {

#define MCSERVE_AVX512 __attribute__((target("avx512f,avx512bw")))

// All-lanes masks for the maskz forms: GCC 12 warns (falsely) that the unmasked forms read an
// uninitialised vector.
constexpr __mmask16 kAll16 = 0xffff;
constexpr __mmask8 kAll8 = 0xff;

// One 32-element step at column c: each weight row's 32 BF16 values widen exactly to F32 as its even
// elements (shift) and odd ones (mask), multiplied with x's even/odd halves of that chunk (xs) by
// F32 FMAs into separate even and odd accumulators (two dependency chains per output, so the FMAs
// of a few rows already keep both FMA pipes busy). With kTail, only the first `mask` lanes are read.
template <int M, int R, bool kTail>
MCSERVE_AVX512 inline void Step(const float* xs, int64_t ldx, const uint16_t* w, int64_t k, int64_t c,
                                __mmask32 mask, __m512 (&even)[M][R], __m512 (&odd)[M][R]) {
  const __m512i odd_mask = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
  __m512 we[R], wo[R];
  for (int r = 0; r < R; ++r) {
    __m512i raw = kTail ? _mm512_maskz_loadu_epi16(mask, w + r * k + c) : _mm512_loadu_si512(w + r * k + c);
    cpu::InRegister(raw);
    we[r] = _mm512_castsi512_ps(_mm512_maskz_slli_epi32(kAll16, raw, 16));
    wo[r] = _mm512_castsi512_ps(_mm512_and_si512(raw, odd_mask));
  }
  for (int i = 0; i < M; ++i) {
    __m512 xe = _mm512_loadu_ps(xs + i * ldx + c), xo = _mm512_loadu_ps(xs + i * ldx + c + 16);
    cpu::InRegister(xe);
    cpu::InRegister(xo);
    for (int r = 0; r < R; ++r) {
      even[i][r] = _mm512_fmadd_ps(xe, we[r], even[i][r]);
      odd[i][r] = _mm512_fmadd_ps(xo, wo[r], odd[i][r]);
    }
  }
}

// The 16-lane sums of a[0..3] as the 4 lanes of one vector: halves added, then two rounds of
// pairwise adds (the transposed reduction, cheaper than four separate horizontal sums).
MCSERVE_AVX512 inline __m128 Sum4(const __m512 (&a)[4]) {
  __m256 h[4];
  for (int r = 0; r < 4; ++r) {
    const __m512d v = _mm512_castps_pd(a[r]);
    const __m256 low = _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(kAll8, v, 0));
    const __m256 high = _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(kAll8, v, 1));
    h[r] = _mm256_add_ps(low, high);
  }
  const __m256 s = _mm256_hadd_ps(_mm256_hadd_ps(h[0], h[1]), _mm256_hadd_ps(h[2], h[3]));
  return _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
}

// out[i, r] (+)= x[i, :] · w[r, :] for i < M, r < R; xs rows (x split per 32-chunk, zero-padded)
// at stride ldx, w rows at stride k: full steps, then one masked step for the tail.
template <int M, int R>
MCSERVE_AVX512 void Block(const float* xs, int64_t ldx, const uint16_t* w, int64_t k, float* out,
                          int64_t ldo, bool accumulate) {
  // One batch row: separate even/odd sums, so 2R FMA chains are in flight. Fixed by M alone, like the
  // reduction below, so a row's bits do not depend on the block it falls in (the threads' ranges).
  constexpr bool kSplit = M == 1;
  __m512 even[M][R], odd[M][R];
  for (int i = 0; i < M; ++i)
    for (int r = 0; r < R; ++r) even[i][r] = odd[i][r] = _mm512_setzero_ps();
  const int64_t full = k & ~int64_t{31};
  // Rows are short and read once: fetch the next blocks' rows (contiguous after these) about
  // kGemvPrefetchBytes ahead, a line per row per step, since the hardware prefetcher has no time to
  // ramp up on them.
  const uint16_t* next = w + GemvPrefetchBlocks(R * k * 2) * R * k;
  for (int64_t c = 0; c < full; c += 32) {
    for (int r = 0; r < R; ++r) _mm_prefetch(reinterpret_cast<const char*>(next + r * k + c), _MM_HINT_T0);
    Step<M, R, false>(xs, ldx, w, k, c, 0, even, kSplit ? odd : even);
  }
  if (full < k) {
    const __mmask32 mask = static_cast<__mmask32>((uint64_t{1} << (k - full)) - 1);
    Step<M, R, true>(xs, ldx, w, k, full, mask, even, kSplit ? odd : even);
  }
  for (int i = 0; i < M; ++i) {
    __m512 sum[R];
    for (int r = 0; r < R; ++r) sum[r] = kSplit ? _mm512_add_ps(even[i][r], odd[i][r]) : even[i][r];
    float* o = out + i * ldo;
    for (int g = 0; g < R; g += 4) {
      // Groups of 4 rows (the last padded with zeros: a lane's sum depends on its own row alone).
      __m512 four[4];
      for (int r = 0; r < 4; ++r) four[r] = g + r < R ? sum[g + r] : _mm512_setzero_ps();
      alignas(16) float s[4];
      _mm_store_ps(s, Sum4(four));
      for (int r = 0; r < 4 && g + r < R; ++r) o[g + r] = accumulate ? o[g + r] + s[r] : s[r];
    }
  }
}

// Batch rows up to which the kernel reads a thread's rows in four contiguous parts side by side
// (FourParts), not a block of rows side by side (Block). On the AMD EPYC (Zen 4) VM, against Block:
// a 36-layer BF16 model from DRAM 1.36-1.58x faster at batch 2-4 with 2 threads, 1.57-2.19x with 1;
// the 10M-parameter model's weights from its L3 with 2 threads 1.35x at batch 2, 0.99x at 3, 0.77x
// at 4 (bench/README.md).
constexpr int kPartsMaxRows = 4;

// out[i, j] (+)= x[i, :] · w[j, :] for i < M and the four rows j = j0 + s·part + t (s < 4), one from
// each of four contiguous parts of a thread's rows, each part read front to back with no software
// prefetch (one 8 KB ahead: 0.88-0.97x). Eight rows side by side (1-1.5 KB apart, prefetched) read
// BF16 weights from DRAM 1.4-1.7x slower on an AMD EPYC (Zen 4) VM than one row after the other
// (bench/README.md); four parts keep 4M (8 at M = 1) FMA chains in flight. A row's sums are those of
// Block<M, R> (even and odd apart at M = 1 only), the four rows reduced by one Sum4.
template <int M>
MCSERVE_AVX512 inline void FourParts(const float* xs, const uint16_t* w, int64_t k, float* out, int64_t n,
                                     bool accumulate, int64_t j0, int64_t part, int64_t t) {
  constexpr bool kSplit = M == 1;
  __m512 even[4][M][1], odd[4][M][1];  // per part, Step's [M][R] accumulators with R = 1
  const uint16_t* rows[4];
  for (int s = 0; s < 4; ++s) {
    for (int i = 0; i < M; ++i) even[s][i][0] = odd[s][i][0] = _mm512_setzero_ps();
    rows[s] = w + (j0 + s * part + t) * k;
  }
  const int64_t full = k & ~int64_t{31}, ldx = Avx512Columns(k);
  for (int64_t c = 0; c < full; c += 32) {
    for (int s = 0; s < 4; ++s) Step<M, 1, false>(xs, ldx, rows[s], k, c, 0, even[s], kSplit ? odd[s] : even[s]);
  }
  if (full < k) {
    const __mmask32 mask = static_cast<__mmask32>((uint64_t{1} << (k - full)) - 1);
    for (int s = 0; s < 4; ++s) Step<M, 1, true>(xs, ldx, rows[s], k, full, mask, even[s], kSplit ? odd[s] : even[s]);
  }
  for (int i = 0; i < M; ++i) {
    __m512 four[4];
    for (int s = 0; s < 4; ++s) four[s] = kSplit ? _mm512_add_ps(even[s][i][0], odd[s][i][0]) : even[s][i][0];
    alignas(16) float sums[4];
    _mm_store_ps(sums, Sum4(four));
    for (int s = 0; s < 4; ++s) {
      float& o = out[i * n + j0 + s * part + t];
      o = accumulate ? o + sums[s] : sums[s];
    }
  }
}

// Output-row blocking per batch size above kPartsMaxRows: the accumulators (M·R) + the widened weight
// halves within the 32 zmm.
template <int M>
constexpr int RowsPerBlock() {
  return M <= 6 ? 3 : 2;
}

template <int M>
MCSERVE_AVX512 void Range(const float* xs, const uint16_t* w, int64_t k, float* out, int64_t n,
                               bool accumulate, int64_t j0, int64_t j1) {
  const int64_t ldx = Avx512Columns(k);
  int64_t j = j0;
  if constexpr (M <= kPartsMaxRows) {
    const int64_t part = (j1 - j0) / 4;  // rows per part
    for (int64_t t = 0; t < part; ++t) FourParts<M>(xs, w, k, out, n, accumulate, j0, part, t);
    j = j0 + 4 * part;
  } else {
    constexpr int R = RowsPerBlock<M>();
    for (; j + R <= j1; j += R) Block<M, R>(xs, ldx, w + j * k, k, out + j, n, accumulate);
  }
  for (; j < j1; ++j) Block<M, 1>(xs, ldx, w + j * k, k, out + j, n, accumulate);
}

}  // namespace

MCSERVE_AVX512 void SplitForAvx512(const float* x, int64_t m, int64_t k, float* xs) {
  const int64_t ldx = Avx512Columns(k);
  // Lane j of the even (odd) half takes element 2j (2j + 1) of the 32 loaded: indices ≥ 16 pick from hi.
  const __m512i even_idx = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd_idx = _mm512_add_epi32(even_idx, _mm512_set1_epi32(1));
  for (int64_t i = 0; i < m; ++i) {
    const float* row = x + i * k;
    for (int64_t c = 0; c < ldx; c += 32) {
      const Columns32 x32 = LoadColumns32(row, k, c);  // zeros past k
      _mm512_storeu_ps(xs + i * ldx + c, _mm512_permutex2var_ps(x32.lo, even_idx, x32.hi));
      _mm512_storeu_ps(xs + i * ldx + c + 16, _mm512_permutex2var_ps(x32.lo, odd_idx, x32.hi));
    }
  }
}

void GemvBf16Avx512(int64_t m, const float* xs, const uint16_t* w, int64_t k, float* out, int64_t n,
                    bool accumulate, int64_t j0, int64_t j1) {
  switch (m) {
    case 1: return Range<1>(xs, w, k, out, n, accumulate, j0, j1);
    case 2: return Range<2>(xs, w, k, out, n, accumulate, j0, j1);
    case 3: return Range<3>(xs, w, k, out, n, accumulate, j0, j1);
    case 4: return Range<4>(xs, w, k, out, n, accumulate, j0, j1);
    case 5: return Range<5>(xs, w, k, out, n, accumulate, j0, j1);
    case 6: return Range<6>(xs, w, k, out, n, accumulate, j0, j1);
    case 7: return Range<7>(xs, w, k, out, n, accumulate, j0, j1);
    case 8: return Range<8>(xs, w, k, out, n, accumulate, j0, j1);
  }
}

}  // namespace mcserve::kernels::internal
