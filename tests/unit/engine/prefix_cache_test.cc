// PrefixCache: chains of blocks, lookups verified token by token (a hash that collides for every
// block still never resumes the wrong prefix), duplicates shared, index references on pages, LRU
// eviction of unused leaves only, the byte budget.
#include "engine/serving/prefix_cache.h"

#include <vector>

#include "gtest/gtest.h"

namespace mcserve::engine {
namespace {

using kernels::Device;
using kernels::Tensor;

constexpr int64_t kBlock = 2;

// A one-layer snapshot of `bytes` bytes.
std::vector<LayerSnapshot> State(int64_t floats) {
  std::vector<LayerSnapshot> s(1);
  s[0].emplace_back("memory", *Tensor::Zeros(kernels::DType::kF32, {1, floats}, Device::kCpu));
  return s;
}

class PrefixCacheTest : public ::testing::Test {
 protected:
  PrefixCacheTest() : store_(1, 1, Device::kCpu) {}
  // Freezes one page into slot 0 and returns the slot's list.
  std::vector<CheckpointList> OnePage() {
    auto memory = Tensor::Zeros(kernels::DType::kF32, {1, 1, 1}, Device::kCpu);
    auto key = Tensor::Zeros(kernels::DType::kF32, {1, 1}, Device::kCpu);
    EXPECT_TRUE(store_.Freeze(0, 0, *memory, *key, {1, 2, 0}).ok());
    return {store_.Checkpoints(0, 0)};
  }
  CheckpointStore store_;
};

TEST_F(PrefixCacheTest, EveryHashCollidesYetLookupsFindOnlyTheirOwnTokens) {
  PrefixCache cache(&store_, kBlock, -1, [](uint64_t, std::span<const int32_t>) { return uint64_t{7}; });
  const std::vector<int32_t> a = {1, 2, 3, 4, 5}, b = {1, 2, 9, 9, 5}, c = {8, 8, 3, 4, 5};
  PrefixCache::Entry* a1 = cache.Insert(nullptr, std::span(a).first(2), State(4), {});
  PrefixCache::Entry* a2 = cache.Insert(a1, std::span(a).subspan(2, 2), State(4), {});
  PrefixCache::Entry* b2 = cache.Insert(a1, std::span(b).subspan(2, 2), State(4), {});
  ASSERT_NE(a2, nullptr);
  ASSERT_NE(b2, nullptr);
  EXPECT_NE(a2, b2);
  EXPECT_EQ(cache.Lookup(a, 2), a2);
  EXPECT_EQ(cache.Lookup(b, 2), b2);
  EXPECT_EQ(cache.Lookup(b, 1), a1);
  EXPECT_EQ(cache.Lookup(c, 2), nullptr);  // same hash as everything, other tokens
  EXPECT_EQ(a2->blocks, 2);
  // Inserting a cached block again returns the existing entry.
  EXPECT_EQ(cache.Insert(a1, std::span(a).subspan(2, 2), State(4), {}), a2);
  EXPECT_EQ(cache.entries(), 3);
  EXPECT_TRUE(cache.SanityCheck().ok()) << cache.SanityCheck();
}

TEST_F(PrefixCacheTest, EntriesHoldTheirPagesUntilEvicted) {
  PrefixCache cache(&store_, kBlock, -1);
  const std::vector<int32_t> a = {1, 2, 3};
  PrefixCache::Entry* e = cache.Insert(nullptr, std::span(a).first(2), State(4), OnePage());
  ASSERT_NE(e, nullptr);
  store_.Clear(0);  // the request ended: only the cache holds the page
  EXPECT_EQ(store_.stats().device_pages, 1);
  EXPECT_EQ(store_.stats().referenced_pages, 0);
  cache.Use(e);
  EXPECT_FALSE(cache.EvictOne());  // in use by a running sequence
  cache.Unuse(e);
  EXPECT_TRUE(cache.EvictOne());
  EXPECT_EQ(store_.stats().device_pages, 0);
  EXPECT_EQ(cache.evictions(), 1);
  EXPECT_EQ(cache.Lookup(a, 1), nullptr);
  EXPECT_TRUE(store_.SanityCheck().ok()) << store_.SanityCheck();
}

TEST_F(PrefixCacheTest, TheBudgetEvictsLeastRecentlyUsedLeavesFirst) {
  PrefixCache cache(&store_, kBlock, /*byte_budget=*/3 * 16);  // three 16-byte snapshots
  const std::vector<int32_t> x = {1, 1, 2, 2}, y = {3, 3}, z = {4, 4};
  PrefixCache::Entry* x1 = cache.Insert(nullptr, std::span(x).first(2), State(4), {});
  PrefixCache::Entry* x2 = cache.Insert(x1, std::span(x).subspan(2, 2), State(4), {});
  PrefixCache::Entry* y1 = cache.Insert(nullptr, y, State(4), {});
  ASSERT_TRUE(x1 && x2 && y1);
  EXPECT_EQ(cache.Lookup(y, 1), y1);  // y most recent; x2 is the LRU leaf (x1 has a child)
  ASSERT_NE(cache.Insert(nullptr, z, State(4), {}), nullptr);
  EXPECT_EQ(cache.Lookup(x, 2), x1);  // x2 evicted, x1 kept
  EXPECT_EQ(cache.Lookup(y, 1), y1);
  EXPECT_EQ(cache.bytes(), 3 * 16);
  // A snapshot larger than the whole budget is refused after evicting what it could.
  EXPECT_EQ(cache.Insert(nullptr, std::span(x).subspan(2, 2), State(100), {}), nullptr);
  EXPECT_TRUE(cache.SanityCheck().ok()) << cache.SanityCheck();
}

}  // namespace
}  // namespace mcserve::engine
