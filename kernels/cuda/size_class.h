// Size classes of the device caching allocators (CUDA and emulated): a request is rounded up to its
// class, freed blocks wait on the class's free list, so a steady decode loop allocates nothing new.
// Plain C++ (no absl), shared by nvcc and the host compiler.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mcserve::kernels::internal {

// Smallest block handed out; every class is a multiple of it, so blocks stay 64-byte aligned.
inline constexpr size_t kMinBlockBytes = 256;

// The class `bytes` rounds up to: 256 B, then four classes per power of two (x, 1.25x, 1.5x,
// 1.75x), so at most 25% of a block is slack. Returns 0 when the class would overflow size_t.
inline size_t SizeClassBytes(size_t bytes) {
  if (bytes <= kMinBlockBytes) return kMinBlockBytes;
  if (bytes > (SIZE_MAX >> 2)) return 0;
  size_t pow2 = kMinBlockBytes;
  while (pow2 * 2 < bytes) pow2 *= 2;  // pow2 < bytes <= 2 * pow2
  const size_t step = pow2 / 4;
  return (bytes + step - 1) / step * step;
}

}  // namespace mcserve::kernels::internal
