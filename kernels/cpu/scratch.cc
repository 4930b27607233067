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

// `n` floats of `buffer`, not zeroed: NaN-filled when the tests poison them.
std::span<float> ForOverwrite(std::vector<float>& buffer, size_t n) {
  const std::span<float> s = Grown(buffer, n);
  if (PoisonForOverwrite()) std::fill(s.begin(), s.end(), std::numeric_limits<float>::quiet_NaN());
  return s;
}

// The calling thread's op scratch buffer.
std::vector<float>& OpBuffer() {
  thread_local std::vector<float> buffer;
  return buffer;
}

// The calling thread's buffer for the inputs a projection prepares (ProjectionInputScratch).
std::vector<float>& ProjectionInputBuffer() {
  thread_local std::vector<float> buffer;
  return buffer;
}

}  // namespace

std::span<float> ThreadScratch(size_t n) {
  thread_local std::vector<float> buffer;
  return Zeroed(buffer, n);
}

std::span<float> OpScratch(size_t n) { return Zeroed(OpBuffer(), n); }

std::span<float> OpScratchForOverwrite(size_t n) { return ForOverwrite(OpBuffer(), n); }

std::span<float> ProjectionInputScratch(size_t n) { return Zeroed(ProjectionInputBuffer(), n); }

std::span<float> ProjectionInputScratchForOverwrite(size_t n) { return ForOverwrite(ProjectionInputBuffer(), n); }

}  // namespace mcserve::kernels::cpu
