// The BF16-weight GEMV on AVX-512 (512-bit loads of 32 BF16 weights widened exactly to F32, F32 FMAs),
// chosen at run time on CPUs that have it; the same binary runs the AVX2 kernel elsewhere. The
// products are those of the AVX2 kernel; only the order of the F32 sums differs. (vdpbf16ps was tried
// and lost: it needs x in BF16, and the three BF16 parts that keep F32 accuracy cost more than the
// widening; bench/README.md.) Any thread.
#pragma once

#include <cstdint>

namespace mcserve::kernels::internal {

// Columns of one row of the kernel's input: k rounded up to a multiple of 32.
inline int64_t Avx512Columns(int64_t k) { return (k + 31) / 32 * 32; }

// xs [m, Avx512Columns(k)]: each 32-column chunk of x [m, k] as its 16 even then 16 odd elements,
// zero past k (the layout the widened weight halves meet).
void SplitForAvx512(const float* x, int64_t m, int64_t k, float* xs);

// Output columns [j0, j1) of out[m, n] (+)= x[m, k] · w[n, k]ᵀ with x as SplitForAvx512 gives it
// and w [n, k] BF16 bits; 1 ≤ m ≤ 8. Call only where cpu::UseAvx512().
void GemvBf16Avx512(int64_t m, const float* xs, const uint16_t* w, int64_t k, float* out, int64_t n,
                    bool accumulate, int64_t j0, int64_t j1);

}  // namespace mcserve::kernels::internal
