#include "kernels/cpu/scratch.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "kernels/core/host_block_cache.h"

namespace mcserve::kernels::cpu {
namespace {

constexpr size_t kInitialFloats = size_t{1} << 14;  // 64 KiB: most decode-step requests fit at once

// `n` floats of `buffer` (contents unspecified), grown at least twofold when it is too small.
std::span<float> Grown(std::vector<float>& buffer, size_t n) {
  if (buffer.empty() || buffer.size() < n) buffer.resize(std::max({n, 2 * buffer.size(), kInitialFloats}));
  return {buffer.data(), n};
}

// `n` zeroed floats of `buffer`.
std::span<float> Zeroed(std::vector<float>& buffer, size_t n) {
  const std::span<float> s = Grown(buffer, n);
  std::fill(s.begin(), s.end(), 0.0f);
  return s;
}

// The calling thread's op scratch buffer.
std::vector<float>& OpBuffer() {
  thread_local std::vector<float> buffer;
  return buffer;
}

}  // namespace

std::span<float> ThreadScratch(size_t n) {
  thread_local std::vector<float> buffer;
  return Zeroed(buffer, n);
}

std::span<float> OpScratch(size_t n) { return Zeroed(OpBuffer(), n); }

std::span<float> OpScratchForOverwrite(size_t n) {
  const std::span<float> s = Grown(OpBuffer(), n);
  if (PoisonForOverwrite()) std::fill(s.begin(), s.end(), std::numeric_limits<float>::quiet_NaN());
  return s;
}

}  // namespace mcserve::kernels::cpu
