// Test helper: reproducible random inputs for kernel tests.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace mcserve::kernels {

// `size` floats drawn uniformly from [lo, hi) with generator seed `seed`.
inline std::vector<float> RandomVector(int64_t size, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(size);
  for (float& f : v) f = u(rng);
  return v;
}

}  // namespace mcserve::kernels
