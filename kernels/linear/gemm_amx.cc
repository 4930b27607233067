#include "kernels/linear/gemm_amx.h"

#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <span>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/scratch.h"
#include "kernels/linear/avx512_columns.h"
#include "kernels/linear/gemv_bf16_avx512.h"

namespace mcserve::kernels::internal {
namespace {

#define MCSERVE_AVX512 __attribute__((target("avx512f,avx512bw")))
#define MCSERVE_AMX __attribute__((target("avx512f,avx512bw,amx-tile,amx-bf16")))

constexpr __mmask16 kAll16 = 0xffff;  // the maskz forms: GCC 12 warns (falsely) on the unmasked ones
constexpr __mmask8 kAll8 = 0xff;
constexpr int kParts = 3;             // BF16 parts of x: 3 × 8 significand bits = F32's 24
constexpr int64_t kTile = 16;         // rows of every tile; 64 bytes a row
constexpr int64_t kStep = 32;         // k columns one A tile holds (32 BF16 = 64 bytes)
constexpr int64_t kPrefetchSteps = 4;  // how far ahead (in column steps) the weight tiles are fetched

std::atomic<bool> force_no_amx{false};

// AMX-TILE and AMX-BF16 in CPUID, and Linux's permission to use tile data in this process.
bool CpuHasAmx() {
  static const bool has = [] {
    const char* isa = std::getenv("MCSERVE_CPU_ISA");
    if (isa != nullptr && (std::strcmp(isa, "avx2") == 0 || std::strcmp(isa, "avx512") == 0)) return false;
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
    const bool amx_bf16 = (edx >> 22) & 1, amx_tile = (edx >> 24) & 1;
    if (!amx_bf16 || !amx_tile) return false;
    constexpr long kReqXcompPerm = 0x1023, kXfeatureXtileData = 18;  // asm/prctl.h, the kernel's xstate bit
    return syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtileData) == 0;
  }();
  return has;
}

int64_t PaddedK(int64_t k) { return (k + kStep - 1) / kStep * kStep; }

// x rounded to BF16 (to nearest, ties to even), kept as F32 with the low 16 bits zero.
MCSERVE_AVX512 inline __m512 RoundToBf16(__m512 x) {
  const __m512i b = _mm512_castps_si512(x);
  const __m512i lsb = _mm512_and_si512(_mm512_maskz_srli_epi32(kAll16, b, 16), _mm512_set1_epi32(1));
  const __m512i r = _mm512_add_epi32(b, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
  return _mm512_castsi512_ps(_mm512_and_si512(r, _mm512_set1_epi32(static_cast<int>(0xffff0000u))));
}

// r [16] rows of 16 32-bit elements → their transpose, in place (unpacks, then 128-bit lane shuffles).
MCSERVE_AVX512 void Transpose16x16(__m512i (&r)[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_maskz_unpacklo_epi32(kAll16, r[i], r[i + 1]);
    t[i + 1] = _mm512_maskz_unpackhi_epi32(kAll16, r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {  // u[i + c]: column c of each 128-bit lane, rows i..i+3
    u[i] = _mm512_maskz_unpacklo_epi64(kAll8, t[i], t[i + 2]);
    u[i + 1] = _mm512_maskz_unpackhi_epi64(kAll8, t[i], t[i + 2]);
    u[i + 2] = _mm512_maskz_unpacklo_epi64(kAll8, t[i + 1], t[i + 3]);
    u[i + 3] = _mm512_maskz_unpackhi_epi64(kAll8, t[i + 1], t[i + 3]);
  }
  for (int c = 0; c < 4; ++c) {  // row 4L + c of the transpose: lane L of u[c], u[4 + c], u[8 + c], u[12 + c]
    const __m512i a01 = _mm512_maskz_shuffle_i32x4(kAll16, u[c], u[4 + c], 0x44), b01 = _mm512_maskz_shuffle_i32x4(kAll16, u[8 + c], u[12 + c], 0x44);
    const __m512i a23 = _mm512_maskz_shuffle_i32x4(kAll16, u[c], u[4 + c], 0xEE), b23 = _mm512_maskz_shuffle_i32x4(kAll16, u[8 + c], u[12 + c], 0xEE);
    r[c] = _mm512_maskz_shuffle_i32x4(kAll16, a01, b01, 0x88);
    r[4 + c] = _mm512_maskz_shuffle_i32x4(kAll16, a01, b01, 0xDD);
    r[8 + c] = _mm512_maskz_shuffle_i32x4(kAll16, a23, b23, 0x88);
    r[12 + c] = _mm512_maskz_shuffle_i32x4(kAll16, a23, b23, 0xDD);
  }
}

// Every part of x's row [c, c + 32) (zeros past k), from one load: words[p] is part p (x = x₁ + x₂ + x₃,
// each part the BF16 rounding of what the earlier parts leave) as 16 32-bit words, word i = the BF16
// pair (2i, 2i + 1).
MCSERVE_AVX512 inline void PartWords(const float* row, int64_t k, int64_t c, __m512i* words, int64_t stride) {
  const Columns32 x32 = LoadColumns32(row, k, c);
  // The high 16 bits of each of the 32 floats, in order: elements 1, 3, ..., 63 of lo ++ hi.
  const __m512i odd_halves = _mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35, 33, 31, 29,
                                              27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  __m512 lo = x32.lo, hi = x32.hi;
  for (int p = 0; p < kParts; ++p) {
    const __m512 part_lo = RoundToBf16(lo), part_hi = RoundToBf16(hi);
    words[p * stride] =
        _mm512_permutex2var_epi16(_mm512_castps_si512(part_lo), odd_halves, _mm512_castps_si512(part_hi));
    lo = _mm512_sub_ps(lo, part_lo);
    hi = _mm512_sub_ps(hi, part_hi);
  }
}

// The AMX tile configuration: palette 1, tiles 0-7 all 16 rows of 64 bytes (C: 0-3, A: 4-5, B: 6-7).
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {64, 64, 64, 64, 64, 64, 64, 64};
  uint8_t rows[16] = {kTile, kTile, kTile, kTile, kTile, kTile, kTile, kTile};
};
// A constant in memory, not a local: GCC 12's _tile_loadconfig tells the compiler it reads only the
// first 8 bytes, so a local's later fields could be left unstored.
constexpr TileConfig kTileConfig;

MCSERVE_AMX void ConfigureTiles() { _tile_loadconfig(&kTileConfig); }

// 16 weight rows as A tiles: tile s (columns [32s, 32s + 32)) at base + 32s, rows `stride` bytes apart.
struct WeightTiles {
  const uint16_t* base = nullptr;
  int64_t stride = 0;
};

// The tiles of weight rows [r0, r0 + 16): read in place where all 16 rows and every column step lie
// inside w, else copied into `pad` [16, kpad] with zeros past the rows (< `end`) and past k.
WeightTiles Weights(const uint16_t* w, int64_t k, int64_t r0, int64_t end, uint16_t* pad) {
  const int64_t kpad = PaddedK(k);
  if (r0 + kTile <= end && k == kpad) return {w + r0 * k, k * 2};
  const int64_t rows = std::min(kTile, end - r0);
  for (int64_t r = 0; r < kTile; ++r) {
    uint16_t* dst = pad + r * kpad;
    if (r < rows) std::memcpy(dst, w + (r0 + r) * k, k * sizeof(uint16_t));
    std::memset(dst + (r < rows ? k : 0), 0, (kpad - (r < rows ? k : 0)) * sizeof(uint16_t));
  }
  return {pad, kpad * 2};
}

// out[m0 + j, n0 + i] (+)= c[i, j] for j < rows_m, i < cols_n: a C tile (weight row i, batch row j)
// transposed back into out's [m, n] layout.
MCSERVE_AVX512 void AddTransposed(const float* c, const GemmAmxArgs& a, int64_t m0, int64_t n0, int64_t cols_n) {
  __m512i r[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_si512(c + 16 * i);
  Transpose16x16(r);
  const __mmask16 mask = cols_n >= 16 ? kAll16 : static_cast<__mmask16>((1u << cols_n) - 1);
  const int64_t rows_m = std::min<int64_t>(16, a.m - m0);
  for (int64_t j = 0; j < rows_m; ++j) {
    float* o = a.out + (m0 + j) * a.n + n0;
    __m512 v = _mm512_castsi512_ps(r[j]);
    if (a.accumulate) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, o));
    _mm512_mask_storeu_ps(o, mask, v);
  }
}

// Tile products of NB weight tiles (16 rows each, from n0) and MB batch tiles (16 rows each, from
// batch block mb): C tile 2·nb + mb accumulates every column step and every part of x. `next`: the
// tiles that run after these (null bases where none), prefetched as these end.
template <int NB, int MB>
MCSERVE_AMX void Block(const GemmAmxArgs& a, const WeightTiles (&wt)[2], const WeightTiles (&next)[2], int64_t mb,
                       int64_t n0, int64_t n_end) {
  const int64_t kpad = PaddedK(a.k), block = kpad * kTile, part = (a.m + kTile - 1) / kTile * block;
  _tile_zero(0);
  if constexpr (MB == 2) _tile_zero(1);
  if constexpr (NB == 2) _tile_zero(2);
  if constexpr (NB == 2 && MB == 2) _tile_zero(3);
  const int64_t steps = kpad / kStep;
  for (int64_t s = 0; s < steps; ++s) {
    // The weight rows' 64-byte pieces kPrefetchSteps column steps ahead, into the next tiles' rows at
    // the end: a tile's 16 rows are 16 streams the hardware prefetcher does not follow, and the
    // weights come from the last-level cache.
    const int64_t ahead = s + kPrefetchSteps;
    const WeightTiles* pf = ahead < steps ? wt : next;
    const int64_t t = ahead < steps ? ahead : ahead - steps;
    for (int nb = 0; nb < 2 && t < steps && pf[nb].base != nullptr; ++nb) {
      const char* p = reinterpret_cast<const char*>(pf[nb].base + t * kStep);
      for (int64_t r = 0; r < kTile; ++r) _mm_prefetch(p + r * pf[nb].stride, _MM_HINT_T0);
    }
    _tile_loadd(4, wt[0].base + s * kStep, wt[0].stride);
    if constexpr (NB == 2) _tile_loadd(5, wt[1].base + s * kStep, wt[1].stride);
    const uint16_t* xs = a.x + mb * block + s * kTile * kStep;  // 16 pair rows of 32 BF16
    for (int p = 0; p < kParts; ++p, xs += part) {
      _tile_loadd(6, xs, 64);
      if constexpr (MB == 2) _tile_loadd(7, xs + block, 64);
      _tile_dpbf16ps(0, 4, 6);
      if constexpr (MB == 2) _tile_dpbf16ps(1, 4, 7);
      if constexpr (NB == 2) _tile_dpbf16ps(2, 5, 6);
      if constexpr (NB == 2 && MB == 2) _tile_dpbf16ps(3, 5, 7);
    }
  }
  alignas(64) float c[4][kTile * kTile];
  _tile_stored(0, c[0], 64);
  if constexpr (MB == 2) _tile_stored(1, c[1], 64);
  if constexpr (NB == 2) _tile_stored(2, c[2], 64);
  if constexpr (NB == 2 && MB == 2) _tile_stored(3, c[3], 64);
  for (int nb = 0; nb < NB; ++nb) {
    for (int b = 0; b < MB; ++b) {
      AddTransposed(c[2 * nb + b], a, (mb + b) * kTile, n0 + nb * kTile, n_end - n0 - nb * kTile);
    }
  }
}

// Every batch block (in pairs) against the NB weight tiles of wt; `next` as Block's, for the last pair.
template <int NB>
MCSERVE_AMX void BatchBlocks(const GemmAmxArgs& a, const WeightTiles (&wt)[2], const WeightTiles (&next)[2],
                             int64_t n0, int64_t n_end) {
  const int64_t blocks = (a.m + kTile - 1) / kTile;
  // The pairs before the last one prefetch their own tiles again (the next pair reads them).
  int64_t mb = 0;
  for (; mb + 2 <= blocks; mb += 2) Block<NB, 2>(a, wt, mb + 2 < blocks ? wt : next, mb, n0, n_end);
  if (mb < blocks) Block<NB, 1>(a, wt, next, mb, n0, n_end);
}

}  // namespace

bool UseAmxBf16Gemm() {
  return !force_no_amx.load(std::memory_order_relaxed) && cpu::UseAvx512() && CpuHasAmx();
}

void ForceNoAmxForTesting(bool force) { force_no_amx.store(force, std::memory_order_relaxed); }

int64_t GemmAmxPackedSize(int64_t m, int64_t k) { return kParts * ((m + kTile - 1) / kTile * kTile) * PaddedK(k); }

int64_t GemmAmxPackPieces(int64_t m, int64_t k) { return (m + kTile - 1) / kTile * (PaddedK(k) / kStep); }

MCSERVE_AVX512 void PackForGemmAmx(const float* x, int64_t m, int64_t k, uint16_t* xp, int64_t begin, int64_t end) {
  const int64_t kpad = PaddedK(k), blocks = (m + kTile - 1) / kTile, block = kpad * kTile, steps = kpad / kStep;
  for (int64_t piece = begin; piece < end; ++piece) {
    const int64_t b = piece / steps, c = piece % steps * kStep;
    __m512i words[kParts][16];  // words[p][j]: part p of batch row 16b + j's 16 pairs of this column step
    for (int64_t j = 0; j < kTile; ++j) {
      const int64_t row = b * kTile + j;
      if (row < m) {
        PartWords(x + row * k, k, c, &words[0][j], 16);
      } else {
        for (int p = 0; p < kParts; ++p) words[p][j] = _mm512_setzero_si512();
      }
    }
    for (int p = 0; p < kParts; ++p) {
      Transpose16x16(words[p]);  // words[p][i]: pair i of the step for every batch row (a B-tile row)
      uint16_t* dst = xp + (p * blocks + b) * block + c * kTile;
      for (int i = 0; i < 16; ++i) _mm512_storeu_si512(dst + i * 32, words[p][i]);
    }
  }
}

void PackForGemmAmx(const float* x, int64_t m, int64_t k, uint16_t* xp) {
  PackForGemmAmx(x, m, k, xp, 0, GemmAmxPackPieces(m, k));
}

MCSERVE_AMX void GemmBf16Amx(const GemmAmxArgs& a, const uint16_t* w, int64_t j0, int64_t j1) {
  const int64_t kpad = PaddedK(a.k);
  uint16_t* pad = nullptr;  // two padded weight blocks, only where a block needs one
  const bool ragged = a.k != kpad || (j1 - j0) % kGemmAmxBlockRows != 0;
  if (ragged) pad = reinterpret_cast<uint16_t*>(cpu::ThreadScratch(static_cast<size_t>(kTile * kpad)).data());
  ConfigureTiles();
  for (int64_t n0 = j0; n0 < j1; n0 += kGemmAmxBlockRows) {
    WeightTiles wt[2], next[2];
    wt[0] = Weights(w, a.k, n0, j1, pad);
    // The next pair's rows where they are read in place (padded copies are made just before use).
    for (int nb = 0; nb < 2; ++nb) {
      const int64_t r0 = n0 + kGemmAmxBlockRows + nb * kTile;
      if (r0 + kTile <= j1 && a.k == kpad) next[nb] = {w + r0 * a.k, a.k * 2};
      if (next[nb].base == nullptr) break;
    }
    if (n0 + kTile < j1) {
      wt[1] = Weights(w, a.k, n0 + kTile, j1, pad == nullptr ? nullptr : pad + kTile * kpad);
      BatchBlocks<2>(a, wt, next, n0, j1);
    } else {
      BatchBlocks<1>(a, wt, next, n0, j1);
    }
  }
  _tile_release();
}

}  // namespace mcserve::kernels::internal
