#include "kernels/cpu/scratch.h"

#include <algorithm>
#include <vector>

namespace mcserve::kernels::cpu {
namespace {

constexpr size_t kInitialFloats = size_t{1} << 14;  // 64 KiB: most decode-step requests fit at once

// `n` zeroed floats of `buffer`, grown at least twofold when it is too small.
std::span<float> Zeroed(std::vector<float>& buffer, size_t n) {
  if (buffer.empty() || buffer.size() < n) buffer.resize(std::max({n, 2 * buffer.size(), kInitialFloats}));
  std::fill_n(buffer.begin(), n, 0.0f);
  return {buffer.data(), n};
}

}  // namespace

std::span<float> ThreadScratch(size_t n) {
  thread_local std::vector<float> buffer;
  return Zeroed(buffer, n);
}

std::span<float> OpScratch(size_t n) {
  thread_local std::vector<float> buffer;
  return Zeroed(buffer, n);
}

}  // namespace mcserve::kernels::cpu
