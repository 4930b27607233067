// HostBlockCache: a dropped tensor's buffer comes back zeroed to the next request of its size; a buffer
// still referenced is never handed out; the limits are kept; without a Scope nothing is cached. One
// asked for overwrite keeps what its last user left, or is poisoned under MCSERVE_POISON_FOR_OVERWRITE=1.
#include "kernels/core/host_block_cache.h"

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "gtest/gtest.h"
#include "kernels/core/tensor.h"
#include "kernels/core/tensor_data.h"

namespace mcserve::kernels {
namespace {

TEST(HostBlockCacheTest, AReleasedBlockComesBackZeroed) {
  HostBlockCache cache;
  void* first = nullptr;
  {
    std::shared_ptr<void> block = cache.Acquire(100);
    ASSERT_NE(block, nullptr);
    first = block.get();
    std::memset(first, 0x7f, 100);
  }
  std::shared_ptr<void> again = cache.Acquire(128);  // same 64-byte-rounded size class
  EXPECT_EQ(again.get(), first);
  const unsigned char* bytes = static_cast<const unsigned char*>(again.get());
  for (int i = 0; i < 128; ++i) ASSERT_EQ(bytes[i], 0) << i;
  EXPECT_EQ(cache.cached_bytes(), 128u);
}

TEST(HostBlockCacheTest, ABlockForOverwriteIsNotZeroedButPoisonedInTests) {
  // ctest runs every unit test with MCSERVE_POISON_FOR_OVERWRITE=1 (cmake/McserveTest.cmake).
  const char* env = std::getenv("MCSERVE_POISON_FOR_OVERWRITE");
  const bool poisoned = env != nullptr && std::strcmp(env, "1") == 0;
  HostBlockCache cache;
  {
    std::shared_ptr<void> fresh = cache.Acquire(256, HostBlockCache::Fill::kUnspecified);
    const unsigned char* bytes = static_cast<const unsigned char*>(fresh.get());
    for (int i = 0; i < 256; ++i) ASSERT_EQ(bytes[i], 0) << i;  // a new block is zeroed either way
    std::memset(fresh.get(), 0x5a, 256);
  }
  std::shared_ptr<void> again = cache.Acquire(256, HostBlockCache::Fill::kUnspecified);
  const unsigned char* bytes = static_cast<const unsigned char*>(again.get());
  for (int i = 0; i < 256; ++i) ASSERT_EQ(bytes[i], poisoned ? 0xff : 0x5a) << i;
}

TEST(HostBlockCacheTest, ATensorForOverwriteReadsAsNaNInTests) {
  const char* env = std::getenv("MCSERVE_POISON_FOR_OVERWRITE");
  if (env == nullptr || std::strcmp(env, "1") != 0) GTEST_SKIP() << "run under ctest (poisoning on)";
  HostBlockCache cache;
  const HostBlockCache::Scope scope(&cache);
  { ASSERT_TRUE(Tensor::Zeros(DType::kF32, {4, 8}, Device::kCpu).ok()); }  // one block, now free
  absl::StatusOr<Tensor> t = Tensor::ForOverwrite(DType::kF32, {4, 8}, Device::kCpu);
  ASSERT_TRUE(t.ok());
  absl::StatusOr<std::vector<float>> values = t->ToHostF32();
  ASSERT_TRUE(values.ok());
  for (float v : *values) ASSERT_TRUE(std::isnan(v));
}

TEST(HostBlockCacheTest, ABlockStillHeldIsNeverHandedOut) {
  HostBlockCache cache;
  std::shared_ptr<void> held = cache.Acquire(64);
  std::shared_ptr<void> other = cache.Acquire(64);
  EXPECT_NE(held.get(), other.get());
  std::shared_ptr<void> copy = other;  // a second user of `other`
  other.reset();
  EXPECT_NE(cache.Acquire(64).get(), copy.get());
}

TEST(HostBlockCacheTest, LimitsAreKept) {
  HostBlockCache cache({.max_block_bytes = 256, .max_total_bytes = 512});
  EXPECT_EQ(cache.Acquire(257), nullptr);  // over the block limit: the caller allocates
  std::shared_ptr<void> a = cache.Acquire(256), b = cache.Acquire(256);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(cache.Acquire(64), nullptr);  // the cache is full
  EXPECT_EQ(cache.cached_bytes(), 512u);
}

TEST(HostBlockCacheTest, TensorsUseTheScopesCacheAndOutliveIt) {
  HostBlockCache cache;
  Tensor kept;
  {
    const HostBlockCache::Scope scope(&cache);
    EXPECT_EQ(HostBlockCache::Current(), &cache);
    auto t = Tensor::Zeros(DType::kF32, {4, 4}, Device::kCpu);
    ASSERT_TRUE(t.ok());
    Data<float>(*t)[5] = 3.0f;
    kept = *t;
  }
  EXPECT_EQ(HostBlockCache::Current(), nullptr);
  EXPECT_EQ(cache.cached_bytes(), 64u);
  EXPECT_EQ(Data<float>(kept)[5], 3.0f);  // still ours: the cache never reuses a held block
  auto outside = Tensor::Zeros(DType::kF32, {4, 4}, Device::kCpu);
  ASSERT_TRUE(outside.ok());
  EXPECT_NE(RawData(*outside), RawData(kept));
  EXPECT_EQ(cache.cached_bytes(), 64u);  // made without the cache
}

}  // namespace
}  // namespace mcserve::kernels
