// The operands of one call of a small-m CPU GEMM kernel (gemm_avx2.h, gemm_avx512.h, gemm_amx.h): x
// prepared in the kernel's own layout, and where its output goes. Any thread.
#pragma once

#include <cstdint>

namespace mcserve::kernels::internal {

// out [m, n] (row stride n) (+)= x [m, k] · wᵀ, x given as the kernel's prepared copy of type X
// (transposed F32 for the AVX2 and AVX-512 GEMMs, packed BF16 parts for AMX).
template <class X>
struct GemmOperands {
  const X* x = nullptr;
  int64_t m = 0, k = 0, n = 0;
  float* out = nullptr;
  bool accumulate = false;
};

}  // namespace mcserve::kernels::internal
