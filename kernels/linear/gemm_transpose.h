// x laid out for the small-m GEMMs (gemm_avx2.h, gemm_avx512.h): transposed once per call so that a
// vector of batch rows sits contiguously under each input column. Any thread.
#pragma once

#include <cstdint>

#include "kernels/linear/gemm_operands.h"

namespace mcserve::kernels::internal {

// The largest m the small-m GEMMs take; larger batches go to OpenBLAS.
inline constexpr int64_t kGemmSmallMaxRows = 64;

// Columns of xt: m rounded up to a multiple of 8 (a ymm of batch rows), at least 16.
inline int64_t GemmLanes(int64_t m) { return m <= 16 ? 16 : (m + 7) / 8 * 8; }

// xt [k, GemmLanes(m)] = x [m, k] transposed, zero in the columns ≥ m (every element written).
void TransposeForGemm(const float* x, int64_t m, int64_t k, float* xt);
// How many independent pieces (8 columns of x each, every row) the transpose splits into, and the same
// transpose of pieces [begin, end) only: threads may transpose disjoint ranges into one xt.
int64_t GemmTransposePieces(int64_t k);
void TransposeForGemm(const float* x, int64_t m, int64_t k, float* xt, int64_t begin, int64_t end);

// One small-m GEMM call's operands: x is TransposeForGemm's xt (of x [m, k]).
using GemmXtArgs = GemmOperands<float>;

}  // namespace mcserve::kernels::internal
