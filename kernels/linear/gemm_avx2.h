// The small-m GEMM on AVX2 + FMA (8 < m ≤ kGemmSmallMaxRows, decode batches), for CPUs without
// AVX-512 and for F16 weights: out[m, n] (+)= x[m, k] · w[n, k]ᵀ with the weights read in their stored
// row-major layout (nothing packed per call, unlike OpenBLAS's sgemm, which repacks its weight panel on
// every call). x comes transposed (TransposeForGemm); a tile of kGemmAvx2BlockRows weight rows meets
// two ymm of batch rows (16) at a time, each weight element broadcast once per column step into 12
// F32 FMA accumulators. BF16 and F16 weights are widened exactly to F32 one tile at a time into an
// L1-sized thread buffer; x stays F32. Any thread.
#pragma once

#include <cstdint>

#include "kernels/linear/gemm_transpose.h"

namespace mcserve::kernels::internal {

// Weight rows per block: output columns should be split among threads in multiples of this.
inline constexpr int64_t kGemmAvx2BlockRows = 6;

// Output columns [j0, j1) with F32 weights w [n, k]; 8 < m ≤ kGemmSmallMaxRows.
void GemmF32Avx2(const GemmXtArgs& a, const float* w, int64_t j0, int64_t j1);

// Output columns [j0, j1) with BF16 weights w [n, k] (bits), widened into cpu::ThreadScratch (so not
// inside another user of it); 8 < m ≤ kGemmSmallMaxRows.
void GemmBf16Avx2(const GemmXtArgs& a, const uint16_t* w, int64_t j0, int64_t j1);

// Output columns [j0, j1) with F16 weights w [n, k] (bits), widened like GemmBf16Avx2's.
void GemmF16Avx2(const GemmXtArgs& a, const uint16_t* w, int64_t j0, int64_t j1);

}  // namespace mcserve::kernels::internal
