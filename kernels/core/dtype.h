// Element types and devices of tensors, and the scalar conversions shared by CPU and CUDA.
#pragma once

#include <cstdint>
#include <cstring>


#include "kernels/core/hd.h"

namespace mcserve::kernels {

// Where a tensor's storage lives. kCudaEmu is the CUDA backend executed on the CPU by the CUDA
// emulator (kernels/cuda/emu/): the same kernels and runtime paths as kCuda, for tests and CI.
enum class Device { kCpu, kCuda, kCudaEmu };

// Element type of a tensor. Weights may be F32, F16 or BF16; state and activations are F32.
enum class DType { kF32, kF16, kBF16, kI32 };

// Size of one element in bytes.
inline constexpr int64_t DTypeSize(DType t) {
  return t == DType::kF16 || t == DType::kBF16 ? 2 : 4;
}

// Human-readable names for error messages: "F32", "cuda", ...
const char* DTypeName(DType t);
const char* DeviceName(Device d);

// bfloat16 bits -> float (exact).
MCSERVE_HD float Bf16ToF32(uint16_t bits) {
  uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// float -> bfloat16 bits, round to nearest even (NaN stays NaN).
MCSERVE_HD uint16_t F32ToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// IEEE half bits -> float (exact, including subnormals, inf and NaN).
MCSERVE_HD float F16ToF32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t u;
  if (exp == 0) {
    if (mant == 0) {
      u = sign;
    } else {  // subnormal: renormalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ffu;
      u = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | (mant << 13);
  } else {
    u = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace mcserve::kernels
