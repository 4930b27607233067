#include "engine/mc/segmentation.h"

namespace mcserve::engine {

int OnlineLevel(int64_t n) { return __builtin_ctzll(static_cast<uint64_t>(n)); }

std::vector<Segment> FenwickSegments(int64_t n) {
  std::vector<Segment> out;
  int64_t end = 0;
  for (int bit = 62; bit >= 0; --bit) {
    const int64_t size = int64_t{1} << bit;
    if (n & size) {
      out.push_back({end + 1, end + size, bit});
      end += size;
    }
  }
  return out;
}

int FenwickStack::Pop(int64_t n) {
  const int p = OnlineLevel(n);
  int dropped = 0;
  while (!blocks_.empty() && blocks_.back().level < p) {
    blocks_.pop_back();
    ++dropped;
  }
  return dropped;
}

void FenwickStack::Push(int64_t n) {
  const int p = OnlineLevel(n);
  blocks_.push_back({n - (int64_t{1} << p) + 1, n, p});
}

}  // namespace mcserve::engine
