// Segment arithmetic of Memory Caching (specs/mc.md B.3): constant-size segments and the
// logarithmic (Fenwick) segmentation of Log-Linear++. Positions are 1-based token indices n.
// Pure functions; any thread.
#pragma once

#include <cstdint>
#include <vector>

namespace mcserve::engine {

// A segment [first, last] (1-based, inclusive). For logarithmic segmentation, level ℓ means the
// segment is an aligned dyadic block of 2^ℓ tokens.
struct Segment {
  int64_t first = 0;
  int64_t last = 0;
  int level = 0;
  bool operator==(const Segment&) const = default;
};

// Constant size C: the local index j ∈ [1, C] of token n in its segment.
inline int64_t LocalIndex(int64_t n, int64_t c) { return (n - 1) % c + 1; }
// Constant size C: whether token n closes its segment (j = C).
inline bool ClosesSegment(int64_t n, int64_t c) { return n % c == 0; }
// Constant size C: number of closed segments token n reads as cached.
inline int64_t CachedSegments(int64_t n, int64_t c) { return (n - 1) / c; }

// Logarithmic: the level of token n's online block, ctz(n) (n ≥ 1).
int OnlineLevel(int64_t n);
// Logarithmic: the blocks of the binary decomposition of n, oldest (largest) first. The last one is
// token n's online block; the others are what it reads as cached. Brute force, for tests and checks.
std::vector<Segment> FenwickSegments(int64_t n);

// Logarithmic, incrementally: the cached blocks as a stack. Before token n: Pop(n) leaves exactly
// the blocks token n reads; after it: Push(n) adds its online block.
class FenwickStack {
 public:
  // Drops blocks of level < ctz(n) (B.3.2 property 3). Returns how many were dropped.
  int Pop(int64_t n);
  // Pushes token n's online block [n − 2^ctz(n) + 1, n].
  void Push(int64_t n);
  const std::vector<Segment>& blocks() const { return blocks_; }

 private:
  std::vector<Segment> blocks_;
};

}  // namespace mcserve::engine
