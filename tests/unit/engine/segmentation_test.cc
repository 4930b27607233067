// Memory Caching segmentation: the incremental Fenwick stack against the brute-force decomposition,
// and the constant-size helpers at and around boundaries.
#include "engine/mc/segmentation.h"

#include "gtest/gtest.h"

namespace mcserve::engine {
namespace {

TEST(FenwickSegmentsTest, PaperExample) {
  // 37 = 32 + 4 + 1 (specs/mc.md B.3.2).
  EXPECT_EQ(FenwickSegments(37), (std::vector<Segment>{{1, 32, 5}, {33, 36, 2}, {37, 37, 0}}));
  EXPECT_EQ(FenwickSegments(40), (std::vector<Segment>{{1, 32, 5}, {33, 40, 3}}));
  EXPECT_EQ(FenwickSegments(64), (std::vector<Segment>{{1, 64, 6}}));
}

TEST(FenwickStackTest, EqualsBruteForceForEveryNUpTo4096) {
  FenwickStack stack;
  for (int64_t n = 1; n <= 4096; ++n) {
    stack.Pop(n);
    std::vector<Segment> expected = FenwickSegments(n);
    const Segment online = expected.back();
    expected.pop_back();
    ASSERT_EQ(stack.blocks(), expected) << "n = " << n;
    EXPECT_EQ(online.last, n);
    EXPECT_EQ(online.level, OnlineLevel(n));
    stack.Push(n);
    ASSERT_EQ(stack.blocks().back(), online) << "n = " << n;
  }
}

TEST(FenwickSegmentsTest, BlocksTileThePrefixAndAreAligned) {
  for (int64_t n = 1; n <= 4096; ++n) {
    int64_t next = 1;
    for (const Segment& s : FenwickSegments(n)) {
      ASSERT_EQ(s.first, next);
      ASSERT_EQ(s.last - s.first + 1, int64_t{1} << s.level);
      ASSERT_EQ((s.first - 1) % (int64_t{1} << s.level), 0);
      next = s.last + 1;
    }
    ASSERT_EQ(next, n + 1);
  }
}

TEST(ConstantSegmentsTest, Boundaries) {
  EXPECT_EQ(LocalIndex(1, 4), 1);
  EXPECT_EQ(LocalIndex(4, 4), 4);
  EXPECT_EQ(LocalIndex(5, 4), 1);
  EXPECT_TRUE(ClosesSegment(4, 4));
  EXPECT_FALSE(ClosesSegment(5, 4));
  EXPECT_EQ(CachedSegments(4, 4), 0);  // the closing token still reads its segment as online
  EXPECT_EQ(CachedSegments(5, 4), 1);
  EXPECT_EQ(CachedSegments(1, 1), 0);
  EXPECT_EQ(CachedSegments(3, 1), 2);
}

}  // namespace
}  // namespace mcserve::engine
