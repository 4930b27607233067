// Loading one row's 32-column step for the AVX-512 kernels that regroup x by columns (the BF16 GEMV's
// even/odd split, the AMX GEMM's BF16 pairs). Any thread; call only on CPUs with AVX-512F.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace mcserve::kernels::internal {

// Columns [c, c + 32) of a row of k floats: lo holds c..c+15, hi c+16..c+31, zeros past column k
// (the masked loads read nothing there, so the row may end anywhere).
struct Columns32 {
  __m512 lo, hi;
};

__attribute__((target("avx512f"))) inline Columns32 LoadColumns32(const float* row, int64_t k, int64_t c) {
  const int64_t left = k - c;
  const __mmask16 all = 0xffff;
  const __mmask16 lo_mask = left >= 16 ? all : left <= 0 ? 0 : static_cast<__mmask16>((1u << left) - 1);
  const __mmask16 hi_mask = left >= 32 ? all : left <= 16 ? 0 : static_cast<__mmask16>((1u << (left - 16)) - 1);
  return {_mm512_maskz_loadu_ps(lo_mask, row + c), _mm512_maskz_loadu_ps(hi_mask, row + c + 16)};
}

}  // namespace mcserve::kernels::internal
