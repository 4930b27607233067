#include "kernels/linear/gemm_avx2.h"

#include <immintrin.h>

#include <algorithm>
#include <span>
#include <type_traits>

#include "kernels/cpu/scratch.h"
#include "kernels/linear/weight_lanes.h"

namespace mcserve::kernels::internal {
namespace {

constexpr int kRows = static_cast<int>(kGemmAvx2BlockRows);

// out[8b + l, r] (+)= Σ_c xt[c, 8b + l] · w[r, c] for the NB blocks of 8 batch rows from block b and
// r < R: w rows [R, k] (F32) at stride k, xt [k, lanes]. acc[nb][r] lane l holds out[8(b + nb) + l, r]:
// NB·R accumulators + NB x vectors + one broadcast within the 16 ymm. Step c also prefetches byte
// c·pf_step of `pf` (the next tile's stored weights; pf_step 0: the same line each step).
template <int NB, int R>
void Tile(const GemmXtArgs& a, int64_t b, const float* w, float* out, const char* pf, int64_t pf_step) {
  const int64_t k = a.k, lanes = GemmLanes(a.m);
  __m256 acc[NB][R];
  for (int nb = 0; nb < NB; ++nb)
    for (int r = 0; r < R; ++r) acc[nb][r] = _mm256_setzero_ps();
  const float* xt = a.x + 8 * b;
  for (int64_t c = 0; c < k; ++c, xt += lanes) {
    _mm_prefetch(pf + c * pf_step, _MM_HINT_T0);
    __m256 xv[NB];
    for (int nb = 0; nb < NB; ++nb) xv[nb] = _mm256_loadu_ps(xt + 8 * nb);
    for (int r = 0; r < R; ++r) {
      const __m256 wb = _mm256_set1_ps(w[r * k + c]);
      for (int nb = 0; nb < NB; ++nb) acc[nb][r] = _mm256_fmadd_ps(xv[nb], wb, acc[nb][r]);
    }
  }
  alignas(64) float tile[R][8 * NB];  // tile[r, i] = the sum for out[8b + i, r]
  for (int r = 0; r < R; ++r)
    for (int nb = 0; nb < NB; ++nb) _mm256_storeu_ps(&tile[r][8 * nb], acc[nb][r]);
  const int64_t i_end = std::min<int64_t>(a.m - 8 * b, 8 * NB);
  for (int64_t i = 0; i < i_end; ++i) {
    float* o = out + (8 * b + i) * a.n;
    for (int r = 0; r < R; ++r) o[r] = a.accumulate ? o[r] + tile[r][i] : tile[r][i];
  }
}

// One tile of R weight rows w [R, k] (stored as W: F32 read in place, else widened into wf [R, k])
// into out[:, 0:R] for every batch row, two blocks of 8 at a time; the first pass prefetches the
// `next` rows after the tile (later passes find the tile in L1).
template <class W, int R>
void RunTile(const GemmXtArgs& a, const typename W::T* w, int64_t next, float* wf, float* out) {
  using T = typename W::T;
  const float* rows = nullptr;
  if constexpr (std::is_same_v<W, F32W>) {
    rows = w;
  } else {
    WidenRows<W>(w, wf, R * a.k);
    rows = wf;
  }
  const char* pf = reinterpret_cast<const char*>(w + R * a.k);
  int64_t pf_step = next * static_cast<int64_t>(sizeof(T));
  const int64_t blocks = (a.m + 7) / 8;
  int64_t b = 0;
  for (; b + 2 <= blocks; b += 2, pf_step = 0) Tile<2, R>(a, b, rows, out, pf, pf_step);
  if (b < blocks) Tile<1, R>(a, b, rows, out, pf, pf_step);
}

// Output columns [j0, j1) from weight rows w [j1 - j0, k] (row j0 first; wf: kRows·k floats unless
// F32): tiles of kRows rows, then the rest by 3 and by 1.
template <class W>
void Columns(const GemmXtArgs& a, const typename W::T* w, float* wf, int64_t j0, int64_t j1) {
  const int64_t k = a.k;
  int64_t j = j0;
  auto rest = [&](int64_t rows, int64_t after) { return std::min<int64_t>(rows, j1 - after); };
  for (; j + kRows <= j1; j += kRows) RunTile<W, kRows>(a, w + (j - j0) * k, rest(kRows, j + kRows), wf, a.out + j);
  for (; j + 3 <= j1; j += 3) RunTile<W, 3>(a, w + (j - j0) * k, rest(3, j + 3), wf, a.out + j);
  for (; j < j1; ++j) RunTile<W, 1>(a, w + (j - j0) * k, rest(1, j + 1), wf, a.out + j);
}

// Columns for widened weights: each tile's rows widened just before it runs, into a thread buffer.
template <class W>
void WidenedColumns(const GemmXtArgs& a, const uint16_t* w, int64_t j0, int64_t j1) {
  const std::span<float> wf = cpu::ThreadScratch(static_cast<size_t>(kRows * a.k));
  Columns<W>(a, w + j0 * a.k, wf.data(), j0, j1);
}

}  // namespace

void GemmF32Avx2(const GemmXtArgs& a, const float* w, int64_t j0, int64_t j1) {
  Columns<F32W>(a, w + j0 * a.k, nullptr, j0, j1);
}

void GemmBf16Avx2(const GemmXtArgs& a, const uint16_t* w, int64_t j0, int64_t j1) {
  WidenedColumns<Bf16W>(a, w, j0, j1);
}

void GemmF16Avx2(const GemmXtArgs& a, const uint16_t* w, int64_t j0, int64_t j1) {
  WidenedColumns<F16W>(a, w, j0, j1);
}

}  // namespace mcserve::kernels::internal
