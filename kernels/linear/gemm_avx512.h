// The small-m GEMM on AVX-512 (8 < m ≤ 64, decode batches): out[m, n] (+)= x[m, k] · w[n, k]ᵀ with the
// weights read in their stored row-major layout (nothing packed per call). x is transposed once per
// call to xt [k, lanes] so 16 batch rows share one zmm (8 share a ymm at the end); each weight element
// is broadcast and multiplied into every batch row by F32 FMAs. BF16 weights are widened exactly to
// F32 a block of rows at a time into an L1-sized thread buffer; x stays F32. Chosen at run time like
// the BF16 GEMV (cpu::UseAvx512: the CPU has AVX-512F/BW, MCSERVE_CPU_ISA is not "avx2", no test
// forced AVX2). Any thread.
#pragma once

#include <cstdint>

#include "kernels/linear/gemm_transpose.h"

namespace mcserve::kernels::internal {

// Weight rows per block for m: output columns should be split among threads in multiples of this.
int64_t GemmAvx512BlockRows(int64_t m);

// Output columns [j0, j1) with F32 weights w [n, k]; 8 < m ≤ kGemmSmallMaxRows. Call only where
// cpu::UseAvx512().
void GemmF32Avx512(const GemmXtArgs& a, const float* w, int64_t j0, int64_t j1);

// Output columns [j0, j1) with BF16 weights w [n, k] (bits), widened into cpu::ThreadScratch (so not
// inside another user of it); 8 < m ≤ kGemmSmallMaxRows. Call only where cpu::UseAvx512().
void GemmBf16Avx512(const GemmXtArgs& a, const uint16_t* w, int64_t j0, int64_t j1);

}  // namespace mcserve::kernels::internal
