// InRegister: keeps a SIMD value in a register. GCC folds a load that several instructions use into
// each of them as a memory operand; in the load-bound GEMV/GEMM loops that repeats the load per use
// (a 512-bit memory operand takes both of Zen 4's load ports). Any thread.
#pragma once

namespace mcserve::kernels::cpu {

// Forces v into a vector register at this point, so later uses read the register, not memory.
template <class V>
inline void InRegister(V& v) {
  asm("" : "+v"(v));
}

}  // namespace mcserve::kernels::cpu
