// CUDA emulator: atomics, math intrinsics and 16-bit float types (included by emu.h only).
// Atomics are plain read-modify-writes: one OS thread runs the whole block and fibers only switch
// at barriers, warp collectives and failed atomicCAS, so no other thread can interleave. The fast
// intrinsics (__expf, __fdividef, ...) are computed exactly, so results match a GPU to rounding,
// not bit for bit.
#pragma once

#include <math.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/core/dtype.h"

namespace mcserve::kernels::emu {
namespace internal {
// Called by a fiber whose atomicCAS failed: lets the other threads run (spin loops progress), and
// fails the launch as a livelock if nothing but failed compare-and-swaps happens for long.
void OnCasFailed();
}  // namespace internal

// ---- Atomics: return the old value, as in CUDA.
// MCSERVE_EMU_ATOMIC(name, T, new_value): T name(T* p, T v), `old` is the previous value.
#define MCSERVE_EMU_ATOMIC(name, T, new_value) \
  inline T name(T* p, T v) {                   \
    T old = *p;                                \
    *p = (new_value);                          \
    return old;                                \
  }
// Signed add/sub wrap around as on a GPU (computed in unsigned arithmetic).
MCSERVE_EMU_ATOMIC(atomicAdd, int, static_cast<int>(static_cast<unsigned>(old) + static_cast<unsigned>(v)))
MCSERVE_EMU_ATOMIC(atomicAdd, unsigned, old + v)
MCSERVE_EMU_ATOMIC(atomicAdd, unsigned long long, old + v)
MCSERVE_EMU_ATOMIC(atomicAdd, float, old + v)
MCSERVE_EMU_ATOMIC(atomicAdd, double, old + v)
MCSERVE_EMU_ATOMIC(atomicSub, int, static_cast<int>(static_cast<unsigned>(old) - static_cast<unsigned>(v)))
MCSERVE_EMU_ATOMIC(atomicSub, unsigned, old - v)
MCSERVE_EMU_ATOMIC(atomicMax, int, old > v ? old : v)
MCSERVE_EMU_ATOMIC(atomicMax, unsigned, old > v ? old : v)
MCSERVE_EMU_ATOMIC(atomicMax, long long, old > v ? old : v)
MCSERVE_EMU_ATOMIC(atomicMax, unsigned long long, old > v ? old : v)
MCSERVE_EMU_ATOMIC(atomicMin, int, old < v ? old : v)
MCSERVE_EMU_ATOMIC(atomicMin, unsigned, old < v ? old : v)
MCSERVE_EMU_ATOMIC(atomicMin, long long, old < v ? old : v)
MCSERVE_EMU_ATOMIC(atomicMin, unsigned long long, old < v ? old : v)
MCSERVE_EMU_ATOMIC(atomicAnd, int, old & v)
MCSERVE_EMU_ATOMIC(atomicAnd, unsigned, old & v)
MCSERVE_EMU_ATOMIC(atomicOr, int, old | v)
MCSERVE_EMU_ATOMIC(atomicOr, unsigned, old | v)
MCSERVE_EMU_ATOMIC(atomicXor, int, old ^ v)
MCSERVE_EMU_ATOMIC(atomicXor, unsigned, old ^ v)
#undef MCSERVE_EMU_ATOMIC
template <typename T>
inline T atomicExch(T* p, T v) {
  static_assert(std::is_same_v<T, int> || std::is_same_v<T, unsigned> ||
                    std::is_same_v<T, unsigned long long> || std::is_same_v<T, float>,
                "atomicExch: int, unsigned, unsigned long long or float");
  T old = *p;
  *p = v;
  return old;
}
template <typename T>
inline T atomicCAS(T* p, T compare, T v) {
  static_assert(std::is_same_v<T, int> || std::is_same_v<T, unsigned> ||
                    std::is_same_v<T, unsigned long long> || std::is_same_v<T, unsigned short>,
                "atomicCAS: int, unsigned, unsigned long long or unsigned short");
  T old = *p;
  if (old == compare) {
    *p = v;
  } else {
    internal::OnCasFailed();
  }
  return old;
}

// ---- Math intrinsics (the standard float functions expf, logf, sqrtf, fmaxf, fminf, fabsf,
// tanhf, erff, log1pf, exp2f, fmaf, ... come from <math.h>). glibc's <math.h> declares __expf,
// __logf, ... itself without exporting them, so these are macros onto the exact functions.
#define __expf(x) ::expf(x)
#define __exp10f(x) ::powf(10.0f, (x))
#define __logf(x) ::logf(x)
#define __log2f(x) ::log2f(x)
#define __powf(x, y) ::powf((x), (y))
#define __sinf(x) ::sinf(x)
#define __cosf(x) ::cosf(x)
#define __tanhf(x) ::tanhf(x)
inline float rsqrtf(float x) { return 1.0f / ::sqrtf(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return ::sqrtf(x); }
inline float __fmaf_rn(float a, float b, float c) { return ::fmaf(a, b, c); }
inline float __saturatef(float x) { return x > 0.0f ? (x < 1.0f ? x : 1.0f) : 0.0f; }  // NaN -> 0
inline float __int_as_float(int i) { return std::bit_cast<float>(i); }
inline int __float_as_int(float f) { return std::bit_cast<int>(f); }
inline float __uint_as_float(unsigned u) { return std::bit_cast<float>(u); }
inline unsigned __float_as_uint(float f) { return std::bit_cast<unsigned>(f); }

// CUDA's device min/max overloads (same-type arguments only).
inline int min(int a, int b) { return a < b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline float min(float a, float b) { return ::fminf(a, b); }
inline double min(double a, double b) { return ::fmin(a, b); }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
inline float max(float a, float b) { return ::fmaxf(a, b); }
inline double max(double a, double b) { return ::fmax(a, b); }

// ---- 16-bit floats: storage types and conversions only (no arithmetic operators).
struct __nv_bfloat16 {
  uint16_t bits;
};
struct __half {
  uint16_t bits;
};
// float -> bf16 / half, round to nearest even.
inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16{F32ToBf16(f)}; }
inline float __bfloat162float(__nv_bfloat16 h) { return Bf16ToF32(h.bits); }
inline float __half2float(__half h) { return F16ToF32(h.bits); }
__half __float2half(float f);

}  // namespace mcserve::kernels::emu

using mcserve::kernels::emu::__bfloat162float;
using mcserve::kernels::emu::__fdividef;
using mcserve::kernels::emu::__float2bfloat16;
using mcserve::kernels::emu::__float2half;
using mcserve::kernels::emu::__float_as_int;
using mcserve::kernels::emu::__float_as_uint;
using mcserve::kernels::emu::__fmaf_rn;
using mcserve::kernels::emu::__frcp_rn;
using mcserve::kernels::emu::__fsqrt_rn;
using mcserve::kernels::emu::__half;
using mcserve::kernels::emu::__half2float;
using mcserve::kernels::emu::__int_as_float;
using mcserve::kernels::emu::__nv_bfloat16;
using mcserve::kernels::emu::__saturatef;
using mcserve::kernels::emu::__uint_as_float;
using mcserve::kernels::emu::atomicAdd;
using mcserve::kernels::emu::atomicAnd;
using mcserve::kernels::emu::atomicCAS;
using mcserve::kernels::emu::atomicExch;
using mcserve::kernels::emu::atomicMax;
using mcserve::kernels::emu::atomicMin;
using mcserve::kernels::emu::atomicOr;
using mcserve::kernels::emu::atomicSub;
using mcserve::kernels::emu::atomicXor;
using mcserve::kernels::emu::max;
using mcserve::kernels::emu::min;
using mcserve::kernels::emu::rsqrtf;
