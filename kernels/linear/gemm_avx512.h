// The small-m GEMM on AVX-512 (8 < m ≤ 64, decode batches): out[m, n] (+)= x[m, k] · w[n, k]ᵀ with the
// weights read in their stored row-major layout (nothing packed per call). x is transposed once per
// call to xt [k, lanes] so 16 batch rows share one zmm (8 share a ymm at the end); each weight element
// is broadcast and multiplied into every batch row by F32 FMAs. BF16 weights are widened exactly to
// F32 a block of rows at a time into an L1-sized thread buffer; x stays F32. Chosen at run time like
// the BF16 GEMV (cpu::UseAvx512: the CPU has AVX-512F/BW, MCSERVE_CPU_ISA is not "avx2", no test
// forced AVX2). Any thread.
#pragma once

#include <cstdint>

#include "kernels/linear/gemm_operands.h"

namespace mcserve::kernels::internal {

// The largest m the GEMM takes; larger batches go to OpenBLAS.
inline constexpr int64_t kGemmAvx512MaxRows = 64;

// Columns of xt: m rounded up to a multiple of 8, at least 16 (a zmm per 16 batch rows, a ymm for 8).
inline int64_t GemmAvx512Lanes(int64_t m) { return m <= 16 ? 16 : (m + 7) / 8 * 8; }

// xt [k, GemmAvx512Lanes(m)] = x [m, k] transposed, zero in the columns ≥ m.
void TransposeForGemmAvx512(const float* x, int64_t m, int64_t k, float* xt);

// Weight rows per block for m: output columns should be split among threads in multiples of this.
int64_t GemmAvx512BlockRows(int64_t m);

// One GEMM call's operands: x is TransposeForGemmAvx512's xt (of x [m, k]).
using GemmAvx512Args = GemmOperands<float>;

// Output columns [j0, j1) with F32 weights w [n, k]; 8 < m ≤ kGemmAvx512MaxRows. Call only where
// cpu::UseAvx512().
void GemmF32Avx512(const GemmAvx512Args& a, const float* w, int64_t j0, int64_t j1);

// Output columns [j0, j1) with BF16 weights w [n, k] (bits), widened into cpu::ThreadScratch (so not
// inside another user of it); 8 < m ≤ kGemmAvx512MaxRows. Call only where cpu::UseAvx512().
void GemmBf16Avx512(const GemmAvx512Args& a, const uint16_t* w, int64_t j0, int64_t j1);

}  // namespace mcserve::kernels::internal
