// CPU Linear, out[m, n] (+)= x[m, k] · w[n, k]ᵀ. Which path runs:
// - m ≤ 8 (decode): a register-blocked GEMV that streams each weight row once and widens BF16/F16 on
//   the fly (AVX2/F16C/FMA), threaded over output rows; BF16 weights run a 512-bit kernel instead
//   where the CPU has AVX-512 (gemv_bf16_avx512.h).
// - 8 < m ≤ 64 with BF16 weights on a CPU with AMX: the AMX GEMM (gemm_amx.h), weights read in place as
//   tiles, x split into three BF16 parts once per call, threaded over blocks of 32 output columns.
// - 8 < m ≤ 24 with BF16 weights on a CPU with AVX-512 but not AMX: the AVX-512 BF16 GEMV in passes of
//   up to 8 rows of x over blocks of weight rows that stay in L1.
// - Other 8 < m ≤ 64: our small-m GEMM, weights read in place (BF16/F16 widened per L1 block), x
//   transposed once, threaded over blocks of output columns: on AVX-512 for F32 and BF16 weights
//   where the CPU has it (gemm_avx512.h), else on AVX2 (gemm_avx2.h; F16 weights always).
// - m > 64: OpenBLAS sgemm per thread on a column block, directly on F32 weights, on blocks of weight
//   rows widened to F32 for BF16/F16.
// LinearGroupCpu runs all items in one ParallelFor on the GEMV, AMX and small-m GEMM paths, else one
// Linear per item.
#include <cblas.h>
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "base/status_macros.h"
#include "kernels/core/tensor_data.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/scratch.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/linear/gemm_amx.h"
#include "kernels/linear/gemm_avx2.h"
#include "kernels/linear/gemm_avx512.h"
#include "kernels/linear/gemv_bf16_avx512.h"
#include "kernels/linear/gemv_prefetch.h"
#include "kernels/linear/linear.h"
#include "kernels/linear/weight_lanes.h"

namespace mcserve::kernels::internal {
namespace {

constexpr int64_t kGemvMaxRows = 8;            // m up to this runs the GEMV kernel
// m up to this runs the AVX-512 BF16 GEMV in passes of kGemvMaxRows where AMX does not take it
// (OnBf16GemvPasses). BF16 decode step against the small-m GEMM, Intel Xeon with AMX kept off: 1.64x at
// m = 9, 1.24x at 12, 1.06x at 16, 1.42x at 17, 1.05x at 24; 0.87x at 32 (bench/README.md).
constexpr int64_t kBf16GemvPassesMaxRows = 24;
// Weight bytes per block that the GEMV's passes run over one after another, read from L1 after the first.
constexpr int64_t kGemvPassBlockBytes = int64_t{16} << 10;
constexpr int64_t kMinParallelMacs = 1 << 15;  // below this, waking the pool costs more than it saves
// The GEMV's bar instead, in weight bytes × rows of x: it is bound by reading the weights, and a
// BF16 256×256 projection (128 KB) at batch 1 ran 1.2x faster on one thread than split over two,
// a 256 KB one 1.1-1.2x slower (bench/README.md).
constexpr int64_t kMinParallelGemvBytes = int64_t{192} << 10;
// x elements from which laying x out for a GEMM (the AMX packing, the small-m GEMMs' transpose) is
// split over the pool: batch 16 at hidden 256.
constexpr int64_t kMinParallelLayoutElements = int64_t{1} << 12;

// The pool for a GEMV of m rows over `weight_bytes` of weights, or null to run it on the calling thread.
cpu::ThreadPool* GemvPool(const Context& ctx, int64_t m, int64_t weight_bytes) {
  return m * weight_bytes >= kMinParallelGemvBytes ? ctx.pool : nullptr;
}

// The pool for laying out x [m, k] for a GEMM (PackForGemmAmx, TransposeForGemm), or null to do it on
// the calling thread.
cpu::ThreadPool* LayoutPool(const Context& ctx, int64_t m, int64_t k) {
  return m * k >= kMinParallelLayoutElements ? ctx.pool : nullptr;
}

constexpr int64_t kConvertBlockBytes = 1 << 20;  // F32 size of one widened weight block (m > 64, OpenBLAS)

inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  __m128 sh = _mm_movehdup_ps(s);
  s = _mm_add_ps(s, sh);
  sh = _mm_movehl_ps(sh, s);
  return _mm_cvtss_f32(_mm_add_ss(s, sh));
}

// From this many batch rows on, the GEMV asks for the weights kGemvPrefetchBytes ahead of its reads
// (a line per 64 bytes). At fewer rows the loop is bound by its loads and the hardware prefetcher
// follows the stream alone: software prefetch made batch 1 and 4 0.9x slower, batch 8 1.2x faster
// (F32, 1 thread, AMD EPYC Zen 4 VM; bench/README.md).
constexpr int kGemvPrefetchRows = 7;

// Streams per GEMV range at M batch rows: each thread's rows are cut into this many contiguous parts,
// read side by side, one row of each at a time, so S·M sums are in flight (the FMA latency bounds
// one sum to ~8 B a cycle) while every part is still read front to back. Rows 1-3 KB apart side by
// side (eight, or two) read F32 weights from DRAM at 9-11 GB/s on an AMD EPYC (Zen 4) VM, one row
// after the other at 22-27 GB/s, four parts 1.12-1.17x faster still; two parts at batch 2-4 1.0-1.7x
// over one. At batch 1 on an AMD EPYC (Zen 5) VM two parts beat four, 1.03-1.12x (F32, 1 and 2
// threads, from L3 and DRAM), and one part lost (0.91-0.95x): two sums already cover the FMA latency at
// the rate a thread reads (bench/README.md; two against four was not measured on Zen 4).
// BF16 (this kernel runs it only where AVX-512 is absent) chains two FMAs into a sum per 16 weights,
// so a sum covers half the bytes per FMA latency: on an AMD EPYC Zen 3 VM (AVX2 only), eight parts at
// batch 1 ran 1.40x (2 threads) and 1.33-1.61x (1 thread) over two from L3, 1.05-1.10x from DRAM;
// five at batch 2 1.18x / 1.03x; more parts at batch 3-6 tied (bench/README.md).
// S·M accumulators + a weight vector (BF16: the loaded, the two widened and the mask) + x within 16 ymm.
template <class W, int M>
constexpr int GemvStreams() {
  if constexpr (std::is_same_v<W, Bf16W>) {
    if (M == 1) return 8;
    if (M == 2) return 5;
  }
  return M <= 4 ? 2 : 1;
}

// out[i, rows_out[s]] (+)= x[i, :] · rows[s] for i < M, s < S: S weight rows, each read front to back
// with one 8-lane sum per batch row (so a request's bits do not depend on the batch it decodes in or
// on the rows beside it), then its tail. x: [M, k] (row stride k), out: row stride ldo. For BF16,
// xs is x with every 16-element chunk split into its even then odd elements (see SplitEvenOdd), so
// one 256-bit load of 16 weights widens with a shift (even) and a mask (odd).
template <class W, int M, int S>
inline void GemvRows(const float* x, const float* xs, const typename W::T* const (&rows)[S], int64_t k,
                     float* const (&rows_out)[S], int64_t ldo, bool accumulate) {
  __m256 acc[S][M];
  for (int s = 0; s < S; ++s)
    for (int i = 0; i < M; ++i) acc[s][i] = _mm256_setzero_ps();
  constexpr int64_t kLineElements = 64 / sizeof(typename W::T);
  const int64_t ahead = GemvPrefetchBlocks(k * static_cast<int64_t>(sizeof(typename W::T))) * k;
  auto prefetch = [&](int64_t c) {
    if (M >= kGemvPrefetchRows && c % kLineElements == 0) {
      for (int s = 0; s < S; ++s) _mm_prefetch(reinterpret_cast<const char*>(rows[s] + ahead + c), _MM_HINT_T0);
    }
  };
  int64_t done = 0;
  if constexpr (std::is_same_v<W, Bf16W>) {
    const __m256i odd_mask = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
    done = k & ~int64_t{15};
    for (int64_t c = 0; c < done; c += 16) {
      prefetch(c);
      for (int s = 0; s < S; ++s) {
        const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[s] + c));
        const __m256 we = _mm256_castsi256_ps(_mm256_slli_epi32(raw, 16));
        const __m256 wo = _mm256_castsi256_ps(_mm256_and_si256(raw, odd_mask));
        for (int i = 0; i < M; ++i) {
          acc[s][i] = _mm256_fmadd_ps(_mm256_loadu_ps(xs + i * k + c), we, acc[s][i]);
          acc[s][i] = _mm256_fmadd_ps(_mm256_loadu_ps(xs + i * k + c + 8), wo, acc[s][i]);
        }
      }
    }
  } else {
    done = k & ~int64_t{7};
    for (int64_t c = 0; c < done; c += 8) {
      prefetch(c);
      for (int s = 0; s < S; ++s) {
        const __m256 wv = W::Load8(rows[s] + c);
        for (int i = 0; i < M; ++i) acc[s][i] = _mm256_fmadd_ps(_mm256_loadu_ps(x + i * k + c), wv, acc[s][i]);
      }
    }
  }
  for (int s = 0; s < S; ++s) {
    for (int i = 0; i < M; ++i) {
      float sum = HorizontalSum(acc[s][i]);
      for (int64_t c = done; c < k; ++c) sum += x[i * k + c] * W::One(rows[s][c]);
      float& o = rows_out[s][i * ldo];
      o = accumulate ? o + sum : sum;
    }
  }
}

// xs[i, chunk] = even elements then odd elements of each full 16-element chunk of x[i, :]
// (the tail past the last full chunk is not written); x, xs: [m, k].
void SplitEvenOdd(const float* x, int64_t m, int64_t k, float* xs) {
  const int64_t k16 = k & ~int64_t{15};
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t c = 0; c < k16; c += 16) {
      for (int j = 0; j < 8; ++j) {
        xs[i * k + c + j] = x[i * k + c + 2 * j];
        xs[i * k + c + 8 + j] = x[i * k + c + 2 * j + 1];
      }
    }
  }
}

// Output columns [j0, j1) of out[M, n] (+)= x[M, k] · w[n, k]ᵀ: the rows cut into GemvStreams<M>()
// contiguous parts read side by side, then the rows left over one at a time.
template <class W, int M>
void GemvRange(const float* x, const float* xs, const typename W::T* w, int64_t k, float* out, int64_t n,
               bool accumulate, int64_t j0, int64_t j1) {
  constexpr int S = GemvStreams<W, M>();
  const int64_t part = (j1 - j0) / S;  // rows per part
  for (int64_t t = 0; t < part; ++t) {
    const typename W::T* rows[S];
    float* rows_out[S];
    for (int s = 0; s < S; ++s) {
      rows[s] = w + (j0 + s * part + t) * k;
      rows_out[s] = out + j0 + s * part + t;
    }
    GemvRows<W, M, S>(x, xs, rows, k, rows_out, n, accumulate);
  }
  for (int64_t j = j0 + S * part; j < j1; ++j) {
    const typename W::T* row[1] = {w + j * k};
    float* row_out[1] = {out + j};
    GemvRows<W, M, 1>(x, xs, row, k, row_out, n, accumulate);
  }
}

template <class W>
void GemvRangeDispatch(int64_t m, const float* x, const float* xs, const typename W::T* w, int64_t k,
                       float* out, int64_t n, bool accumulate, int64_t j0, int64_t j1) {
  switch (m) {
    case 1: return GemvRange<W, 1>(x, xs, w, k, out, n, accumulate, j0, j1);
    case 2: return GemvRange<W, 2>(x, xs, w, k, out, n, accumulate, j0, j1);
    case 3: return GemvRange<W, 3>(x, xs, w, k, out, n, accumulate, j0, j1);
    case 4: return GemvRange<W, 4>(x, xs, w, k, out, n, accumulate, j0, j1);
    case 5: return GemvRange<W, 5>(x, xs, w, k, out, n, accumulate, j0, j1);
    case 6: return GemvRange<W, 6>(x, xs, w, k, out, n, accumulate, j0, j1);
    case 7: return GemvRange<W, 7>(x, xs, w, k, out, n, accumulate, j0, j1);
    case 8: return GemvRange<W, 8>(x, xs, w, k, out, n, accumulate, j0, j1);
  }
}

// x [m, k] in the AVX2 BF16 kernel's layout (SplitEvenOdd), in the thread's projection-input scratch.
const float* EvenOddInput(const float* x, int64_t m, int64_t k) {
  const std::span<float> xs = cpu::ProjectionInputScratch(static_cast<size_t>(m * k));
  SplitEvenOdd(x, m, k, xs.data());
  return xs.data();
}

// x [m, k] in the AVX-512 BF16 kernel's layout (SplitForAvx512, which writes every element, the
// padding past k included), in the thread's projection-input scratch.
const float* Avx512Input(const float* x, int64_t m, int64_t k) {
  const std::span<float> xs = cpu::ProjectionInputScratchForOverwrite(static_cast<size_t>(m * Avx512Columns(k)));
  SplitForAvx512(x, m, k, xs.data());
  return xs.data();
}

// Output columns [j0, j1) of out [m, n] (+)= x · wᵀ on the AVX-512 BF16 GEMV for any m (xs: SplitForAvx512's
// layout): rows of x in passes of at most kGemvMaxRows, over blocks of kGemvPassBlockBytes of weight rows
// (a multiple of 8 rows) so that the passes after the first read them from L1.
void GemvBf16Avx512Rows(int64_t m, const float* xs, const uint16_t* w, int64_t k, float* out, int64_t n,
                        bool accumulate, int64_t j0, int64_t j1) {
  if (m <= kGemvMaxRows) return GemvBf16Avx512(m, xs, w, k, out, n, accumulate, j0, j1);
  const int64_t row_bytes = k * static_cast<int64_t>(sizeof(uint16_t));
  const int64_t cols = Avx512Columns(k), block = std::max<int64_t>(8, kGemvPassBlockBytes / row_bytes / 8 * 8);
  for (int64_t b = j0; b < j1; b += block) {
    for (int64_t r = 0; r < m; r += kGemvMaxRows) {
      GemvBf16Avx512(std::min(kGemvMaxRows, m - r), xs + r * cols, w, k, out + r * n, n, accumulate, b,
                     std::min(j1, b + block));
    }
  }
}

template <class W>
void Gemv(const Context& ctx, int64_t m, const float* x, const typename W::T* w, int64_t k, float* out,
          int64_t n, bool accumulate) {
  cpu::ThreadPool* pool = GemvPool(ctx, m, n * k * static_cast<int64_t>(sizeof(typename W::T)));
  if constexpr (std::is_same_v<W, Bf16W>) {
    if (cpu::UseAvx512()) {
      const float* xs = Avx512Input(x, m, k);
      cpu::ParallelFor(
          pool, n, [&](int64_t j0, int64_t j1) { GemvBf16Avx512Rows(m, xs, w, k, out, n, accumulate, j0, j1); },
          cpu::kGemvChunksPerThread);
      return;
    }
  }
  const float* xs = x;
  if constexpr (std::is_same_v<W, Bf16W>) xs = EvenOddInput(x, m, k);
  cpu::ParallelFor(
      pool, n, [&](int64_t j0, int64_t j1) { GemvRangeDispatch<W>(m, x, xs, w, k, out, n, accumulate, j0, j1); },
      cpu::kGemvChunksPerThread);
}

// out[:, j0:j1] (+)= x[m, k] · w[j0:j1, k]ᵀ on the calling thread: sgemm straight on F32 weights;
// BF16/F16 weights are widened block by block into a thread-local buffer first.
template <class W>
void GemmColumns(int64_t m, const float* x, const typename W::T* w, int64_t k, float* out, int64_t n,
                 bool accumulate, int64_t j0, int64_t j1) {
  auto sgemm = [&](const float* wf, int64_t first, int64_t rows) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), static_cast<int>(rows),
                static_cast<int>(k), 1.0f, x, static_cast<int>(k), wf, static_cast<int>(k),
                accumulate ? 1.0f : 0.0f, out + first, static_cast<int>(n));
  };
  if constexpr (std::is_same_v<W, F32W>) {
    sgemm(w + j0 * k, j0, j1 - j0);
  } else {
    const int64_t block_rows = std::max<int64_t>(kConvertBlockBytes / (k * 4), 16);
    const std::span<float> buffer = cpu::ThreadScratch(static_cast<size_t>(std::min(block_rows, j1 - j0) * k));
    for (int64_t b = j0; b < j1; b += block_rows) {
      const int64_t rows = std::min(block_rows, j1 - b);
      WidenRows<W>(w + b * k, buffer.data(), rows * k);
      sgemm(buffer.data(), b, rows);
    }
  }
}

// out[m, n] (+)= x[m, k] · w[n, k]ᵀ for m > kGemmSmallMaxRows: output columns split over our pool, each
// block one single-threaded sgemm (cpu::ThreadPool turns OpenBLAS's own threads off).
template <class W>
void Gemm(const Context& ctx, int64_t m, const float* x, const typename W::T* w, int64_t k, float* out,
          int64_t n, bool accumulate) {
  cpu::ThreadPool* pool = m * n * k >= kMinParallelMacs ? ctx.pool : nullptr;
  const int64_t parts = pool == nullptr ? 1 : pool->num_threads();
  cpu::ParallelFor(pool, parts, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      // Column blocks rounded to 16 so every sgemm sees whole micro-panels.
      const int64_t per = (n + parts - 1) / parts;
      const int64_t first = std::min(n, (p * per + 15) / 16 * 16), last = std::min(n, ((p + 1) * per + 15) / 16 * 16);
      if (first < last) GemmColumns<W>(m, x, w, k, out, n, accumulate, first, last);
    }
  });
}

// Whether m rows of x against BF16 weights run the AMX GEMM.
bool OnAmx(int64_t m) { return m >= kGemmAmxMinRows && m <= kGemmSmallMaxRows && UseAmxBf16Gemm(); }

// Whether m > kGemvMaxRows rows of x against BF16 weights run the AVX-512 GEMV in passes
// (GemvBf16Avx512Rows) rather than the small-m GEMM, which widens every weight block: where the CPU has
// AVX-512 but AMX does not take m, up to kBf16GemvPassesMaxRows.
bool OnBf16GemvPasses(int64_t m) {
  return m > kGemvMaxRows && m <= kBf16GemvPassesMaxRows && !OnAmx(m) && cpu::UseAvx512();
}

// x [m, k] packed for the AMX GEMM (PackForGemmAmx) in the calling thread's projection-input scratch
// (every element written), split over the pool where it is large enough.
const uint16_t* AmxInput(const Context& ctx, const float* x, int64_t m, int64_t k) {
  const std::span<float> xp =
      cpu::ProjectionInputScratchForOverwrite(static_cast<size_t>(GemmAmxPackedSize(m, k) + 1) / 2);
  uint16_t* out = reinterpret_cast<uint16_t*>(xp.data());
  cpu::ParallelFor(LayoutPool(ctx, m, k), GemmAmxPackPieces(m, k),
                   [&](int64_t begin, int64_t end) { PackForGemmAmx(x, m, k, out, begin, end); });
  return out;
}

// out[m, n] (+)= x[m, k] · w[n, k]ᵀ on AMX (OnAmx(m)): x packed once, blocks of 32 output columns
// split over the pool.
void GemmAmx(const Context& ctx, int64_t m, const float* x, const uint16_t* w, int64_t k, float* out, int64_t n,
             bool accumulate) {
  const GemmAmxArgs args{.x = AmxInput(ctx, x, m, k), .m = m, .k = k, .n = n, .out = out, .accumulate = accumulate};
  cpu::ThreadPool* pool = m * n * k >= kMinParallelMacs ? ctx.pool : nullptr;
  const int64_t blocks = (n + kGemmAmxBlockRows - 1) / kGemmAmxBlockRows;
  cpu::ParallelFor(pool, blocks, [&](int64_t b0, int64_t b1) {
    GemmBf16Amx(args, w, b0 * kGemmAmxBlockRows, std::min(n, b1 * kGemmAmxBlockRows));
  });
}

template <class W>
void Run(const Context& ctx, int64_t m, const float* x, const typename W::T* w, int64_t k, float* out,
         int64_t n, bool accumulate) {
  if (m <= kGemvMaxRows) return Gemv<W>(ctx, m, x, w, k, out, n, accumulate);
  if constexpr (std::is_same_v<W, Bf16W>) {
    if (OnAmx(m)) return GemmAmx(ctx, m, x, w, k, out, n, accumulate);
    if (OnBf16GemvPasses(m)) return Gemv<W>(ctx, m, x, w, k, out, n, accumulate);
  }
  Gemm<W>(ctx, m, x, w, k, out, n, accumulate);
}

// Rows [j0, j1) of one item of a GEMV group, dispatched on its weight's dtype: x as is, xs (x split
// even/odd) for the AVX2 BF16 kernel, x512 (SplitForAvx512, or null) for the AVX-512 one.
void GroupItemRange(const LinearGroupItem& item, int64_t m, const float* x, const float* xs,
                    const float* x512, int64_t k, int64_t j0, int64_t j1) {
  const Tensor& w = *item.w;
  float* out = Data<float>(*item.out);
  const int64_t n = w.dim(0);
  switch (w.dtype()) {
    case DType::kF32:
      return GemvRangeDispatch<F32W>(m, x, x, Data<float>(w), k, out, n, false, j0, j1);
    case DType::kBF16:
      if (x512 != nullptr) return GemvBf16Avx512Rows(m, x512, Data<uint16_t>(w), k, out, n, false, j0, j1);
      return GemvRangeDispatch<Bf16W>(m, x, xs, Data<uint16_t>(w), k, out, n, false, j0, j1);
    case DType::kF16:
      return GemvRangeDispatch<F16W>(m, x, x, Data<uint16_t>(w), k, out, n, false, j0, j1);
    case DType::kI32:
      return;  // refused by validation
  }
}

// Runs fn(item, j0, j1) over every item's output columns [j0, j1) in blocks of rows_of(item), the
// items' blocks one after another in one ParallelFor (bit-equal to separate calls: a column's sum does
// not depend on its block).
template <class RowsOf, class Fn>
void ForGroupBlocks(const Context& ctx, std::span<const LinearGroupItem> items, int64_t m, int64_t k,
                    const RowsOf& rows_of, const Fn& fn) {
  int64_t blocks = 0, total = 0;
  for (const LinearGroupItem& item : items) {
    const int64_t rows = rows_of(item);
    blocks += (item.w->dim(0) + rows - 1) / rows;
    total += item.w->dim(0);
  }
  cpu::ThreadPool* pool = m * total * k >= kMinParallelMacs ? ctx.pool : nullptr;
  cpu::ParallelFor(pool, blocks, [&](int64_t b0, int64_t b1) {
    int64_t first = 0;  // the item's first block
    for (const LinearGroupItem& item : items) {
      const int64_t n = item.w->dim(0), rows = rows_of(item), count = (n + rows - 1) / rows;
      const int64_t lo = std::max(b0, first), hi = std::min(b1, first + count);
      if (lo < hi) fn(item, (lo - first) * rows, std::min(n, (hi - first) * rows));
      first += count;
    }
  });
}

// Whether a small-m GEMM of this weight runs the AVX-512 kernel (the CPU allows it; F16 weights have
// only the AVX2 one) rather than the AVX2 one.
bool SmallGemmOnAvx512(const Tensor& w) { return w.dtype() != DType::kF16 && cpu::UseAvx512(); }

// Weight rows per block of this weight's small-m GEMM kernel for m rows of x.
int64_t SmallGemmBlockRows(const Tensor& w, int64_t m) {
  return SmallGemmOnAvx512(w) ? GemmAvx512BlockRows(m) : kGemmAvx2BlockRows;
}

// Output columns [j0, j1) of one weight's small-m GEMM (a.x: TransposeForGemm's xt), on the kernel
// SmallGemmOnAvx512 picks.
void SmallGemmColumns(const GemmXtArgs& a, const Tensor& w, int64_t j0, int64_t j1) {
  const bool wide = SmallGemmOnAvx512(w);
  switch (w.dtype()) {
    case DType::kF32:
      return wide ? GemmF32Avx512(a, Data<float>(w), j0, j1) : GemmF32Avx2(a, Data<float>(w), j0, j1);
    case DType::kBF16:
      return wide ? GemmBf16Avx512(a, Data<uint16_t>(w), j0, j1) : GemmBf16Avx2(a, Data<uint16_t>(w), j0, j1);
    case DType::kF16:
      return GemmF16Avx2(a, Data<uint16_t>(w), j0, j1);
    case DType::kI32:
      return;  // refused by validation
  }
}

// out_i [m, n_i] (+)= x [m, k] · w_iᵀ for every item, kGemvMaxRows < m ≤ kGemmSmallMaxRows, on our
// small-m GEMMs (gemm_avx2.h, gemm_avx512.h): x transposed once into the projection-input scratch, then
// every item's blocks of weight rows, read in place, in one ParallelFor.
void SmallGemm(const Context& ctx, const float* x, int64_t m, int64_t k, std::span<const LinearGroupItem> items,
               bool accumulate) {
  // Every lane is written by the transpose: no zeroing first.
  const std::span<float> xt = cpu::ProjectionInputScratchForOverwrite(static_cast<size_t>(k * GemmLanes(m)));
  cpu::ParallelFor(LayoutPool(ctx, m, k), GemmTransposePieces(k),
                   [&](int64_t begin, int64_t end) { TransposeForGemm(x, m, k, xt.data(), begin, end); });
  auto rows_of = [m](const LinearGroupItem& item) { return SmallGemmBlockRows(*item.w, m); };
  ForGroupBlocks(ctx, items, m, k, rows_of, [&](const LinearGroupItem& item, int64_t j0, int64_t j1) {
    const GemmXtArgs a{.x = xt.data(), .m = m, .k = k, .n = item.w->dim(0), .out = Data<float>(*item.out),
                       .accumulate = accumulate};
    SmallGemmColumns(a, *item.w, j0, j1);
  });
}

// Whether a group item has BF16 weights.
bool IsBf16(const LinearGroupItem& item) { return item.w->dtype() == DType::kBF16; }

// Whether these items with m rows of x run SmallGemm: kGemvMaxRows < m ≤ kGemmSmallMaxRows, and no BF16
// item would run on AMX or the GEMV in passes alone (a group mixing BF16 with other weights there runs
// item by item, so each stays bit-equal to its own Linear call).
bool OnSmallGemm(std::span<const LinearGroupItem> items, int64_t m) {
  if (m <= kGemvMaxRows || m > kGemmSmallMaxRows) return false;
  return !(OnAmx(m) || OnBf16GemvPasses(m)) || std::none_of(items.begin(), items.end(), IsBf16);
}

// Whether a group with m rows of x runs on the GEMV: m ≤ kGemvMaxRows, or every item BF16 where the GEMV
// runs in passes (a BF16 item mixed with others there runs alone, as on AMX).
bool GroupOnGemv(const LinearGroupArgs& args, int64_t m) {
  return m <= kGemvMaxRows || (OnBf16GemvPasses(m) && std::all_of(args.items.begin(), args.items.end(), IsBf16));
}

// Whether a group with m rows of x runs GroupGemmAmx: OnAmx(m) and every item has BF16 weights.
bool GroupOnAmx(const LinearGroupArgs& args, int64_t m) {
  return OnAmx(m) && std::all_of(args.items.begin(), args.items.end(), IsBf16);
}

// LinearGroupCpu on the AMX GEMM: x [m, k] packed once, then every item's blocks of 32 weight rows.
void GroupGemmAmx(const Context& ctx, const LinearGroupArgs& args) {
  const Tensor& x = *args.x;
  const int64_t m = x.dim(0), k = x.dim(1);
  const uint16_t* xp = AmxInput(ctx, Data<float>(x), m, k);
  auto rows_of = [](const LinearGroupItem&) { return kGemmAmxBlockRows; };
  ForGroupBlocks(ctx, args.items, m, k, rows_of, [&](const LinearGroupItem& item, int64_t j0, int64_t j1) {
    const GemmAmxArgs a{.x = xp, .m = m, .k = k, .n = item.w->dim(0), .out = Data<float>(*item.out)};
    GemmBf16Amx(a, Data<uint16_t>(*item.w), j0, j1);
  });
}

}  // namespace

absl::Status LinearGroupCpu(const Context& ctx, const LinearGroupArgs& args) {
  const Tensor& x = *args.x;
  const int64_t m = x.dim(0), k = x.dim(1);
  if (k > 0 && GroupOnAmx(args, m)) {
    GroupGemmAmx(ctx, args);
    return absl::OkStatus();
  }
  if (k > 0 && OnSmallGemm(args.items, m)) {
    SmallGemm(ctx, Data<float>(x), m, k, args.items, /*accumulate=*/false);
    return absl::OkStatus();
  }
  if (!GroupOnGemv(args, m) || m == 0 || k == 0) {  // other GEMM sizes: one sgemm pass per item
    for (const LinearGroupItem& item : args.items) {
      MCSERVE_RETURN_IF_ERROR(LinearCpu(ctx, {.x = args.x, .w = item.w, .out = item.out}));
    }
    return absl::OkStatus();
  }
  const float* xp = Data<float>(x);
  const float* xs = xp;
  int64_t total = 0, weight_bytes = 0;
  bool any_bf16 = false;
  for (const LinearGroupItem& item : args.items) {
    total += item.w->dim(0);
    weight_bytes += item.w->nbytes();
    any_bf16 = any_bf16 || item.w->dtype() == DType::kBF16;
  }
  const float* x512 = nullptr;
  if (any_bf16 && cpu::UseAvx512()) {
    x512 = Avx512Input(xp, m, k);
  } else if (any_bf16) {
    xs = EvenOddInput(xp, m, k);
  }
  // Rows [0, total) are the items' output rows one after another; each block runs its share of each.
  cpu::ThreadPool* pool = GemvPool(ctx, m, weight_bytes);
  cpu::ParallelFor(
      pool, total,
      [&](int64_t j0, int64_t j1) {
        int64_t first = 0;
        for (const LinearGroupItem& item : args.items) {
          const int64_t n = item.w->dim(0), lo = std::max(j0, first), hi = std::min(j1, first + n);
          if (lo < hi) GroupItemRange(item, m, xp, xs, x512, k, lo - first, hi - first);
          first += n;
        }
      },
      cpu::kGemvChunksPerThread);
  return absl::OkStatus();
}

absl::Status LinearCpu(const Context& ctx, const LinearArgs& args) {
  const Tensor &x = *args.x, &w = *args.w;
  Tensor& out = *args.out;
  const int64_t m = x.dim(0), k = x.dim(1), n = w.dim(0);
  if (m == 0 || n == 0) return absl::OkStatus();
  float* o = Data<float>(out);
  if (k == 0) {  // empty reduction: x·wᵀ = 0 (BLAS rejects lda = 0)
    if (!args.accumulate) std::fill(o, o + m * n, 0.0f);
    return absl::OkStatus();
  }
  const float* xp = Data<float>(x);
  if (const LinearGroupItem item{.w = args.w, .out = args.out}; OnSmallGemm({&item, 1}, m)) {
    SmallGemm(ctx, xp, m, k, {&item, 1}, args.accumulate);
    return absl::OkStatus();
  }
  switch (w.dtype()) {
    case DType::kF32:
      Run<F32W>(ctx, m, xp, Data<float>(w), k, o, n, args.accumulate);
      break;
    case DType::kBF16:
      Run<Bf16W>(ctx, m, xp, Data<uint16_t>(w), k, o, n, args.accumulate);
      break;
    case DType::kF16:
      Run<F16W>(ctx, m, xp, Data<uint16_t>(w), k, o, n, args.accumulate);
      break;
    case DType::kI32:
      return absl::InvalidArgumentError("Linear: I32 weights");
  }
  return absl::OkStatus();
}

}  // namespace mcserve::kernels::internal
