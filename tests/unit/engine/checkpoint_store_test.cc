// CheckpointStore: tier placement by byte budget, accounting, staging of host pages into the hot set
// (hits, LRU trimming, never evicting a page of the current call), drops and clears, full-store
// errors — on the CPU backend and on the emulated CUDA device (where the tiers are really apart).
#include "engine/mc/checkpoint_store.h"

#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "kernels/core/tensor_data.h"
#include "tests/unit/kernels/param_printers.h"

namespace mcserve::engine {
namespace {

using kernels::Device;
using kernels::Tensor;

constexpr int64_t kHs = 2, kK = 3, kV = 4;
constexpr int64_t kPageBytes = kHs * kK * kV * 4;  // one memory

class CheckpointStoreTest : public ::testing::TestWithParam<Device> {
 protected:
  Device device() const { return GetParam(); }
  // Freezes a page whose memory is all `value` and pooled key all −value.
  absl::Status FreezeValue(CheckpointStore& store, int slot, int layer, float value, int64_t last) {
    auto memory = Tensor::FromHost(std::vector<float>(kHs * kK * kV, value), {kHs, kK, kV}, device());
    auto key = Tensor::FromHost(std::vector<float>(kHs * kK, -value), {kHs, kK}, device());
    if (!memory.ok()) return memory.status();
    if (!key.ok()) return key.status();
    return store.Freeze(slot, layer, *memory, *key, {last - 3, last, 0});
  }
  static float FirstValue(const Tensor& t) { return (*t.ToHostF32())[0]; }
};

TEST_P(CheckpointStoreTest, PagesBeyondTheDeviceBudgetGoToTheHostTier) {
  CheckpointStore store(2, 2, device(), {.device_bytes = 2 * kPageBytes, .hot_pages = 1});
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(FreezeValue(store, 1, 0, 10.0f + i, 4 * (i + 1)).ok());
  const auto cps = store.Checkpoints(1, 0);
  ASSERT_EQ(cps.size(), 4u);
  EXPECT_EQ(cps[0]->tier, CheckpointTier::kDevice);
  EXPECT_EQ(cps[1]->tier, CheckpointTier::kDevice);
  EXPECT_EQ(cps[2]->tier, CheckpointTier::kHost);
  EXPECT_EQ(cps[3]->tier, CheckpointTier::kHost);
  EXPECT_EQ(cps[2]->memory.device(), Device::kCpu);
  EXPECT_EQ(cps[2]->pooled_key.device(), device());  // keys always on the device
  EXPECT_EQ(cps[3]->segment.last, 16);
  const CheckpointStoreStats s = store.stats();
  EXPECT_EQ(s.device_pages, 2);
  EXPECT_EQ(s.host_pages, 2);
  EXPECT_EQ(s.host_bytes, 2 * kPageBytes);
  EXPECT_EQ(s.device_bytes, 2 * kPageBytes + 4 * kHs * kK * 4);
  EXPECT_FALSE(store.AllOnDevice(1, 0));
  EXPECT_TRUE(store.AllOnDevice(1, 1));
  EXPECT_TRUE(store.AllOnDevice(0, 0));
}

TEST_P(CheckpointStoreTest, StagingCopiesHostPagesAndReusesTheHotSet) {
  CheckpointStore store(1, 1, device(), {.device_bytes = 0, .hot_pages = 1});
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(FreezeValue(store, 0, 0, 10.0f + i, 4 * (i + 1)).ok());
  ASSERT_EQ(store.stats().host_pages, 3);

  const std::vector<int32_t> both = {0, 2};
  auto staged = store.Stage(0, 0, both);
  ASSERT_TRUE(staged.ok()) << staged.status();
  ASSERT_EQ(staged->size(), 2u);
  EXPECT_EQ((*staged)[0]->device(), device());
  EXPECT_EQ(FirstValue(*(*staged)[0]), 10.0f);
  EXPECT_EQ(FirstValue(*(*staged)[1]), 12.0f);
  // Both pages of the call stay although the hot set holds one page.
  EXPECT_EQ(store.stats().stagings, 2);
  EXPECT_EQ(store.stats().hot_pages, 2);

  // Next call: page 2 is found staged (a hit); page 0, unused now, is trimmed away.
  const std::vector<int32_t> last = {2};
  staged = store.Stage(0, 0, last);
  ASSERT_TRUE(staged.ok());
  EXPECT_EQ(FirstValue(*(*staged)[0]), 12.0f);
  EXPECT_EQ(store.stats().hot_hits, 1);
  EXPECT_EQ(store.stats().stagings, 2);
  EXPECT_EQ(store.stats().hot_pages, 1);
  EXPECT_EQ(store.stats().hot_bytes, kPageBytes);

  // Page 0 again: staged anew (a miss), page 2 trimmed.
  const std::vector<int32_t> first = {0};
  staged = store.Stage(0, 0, first);
  ASSERT_TRUE(staged.ok());
  EXPECT_EQ(FirstValue(*(*staged)[0]), 10.0f);
  EXPECT_EQ(store.stats().stagings, 3);
  EXPECT_EQ(store.stats().hot_pages, 1);
}

TEST_P(CheckpointStoreTest, DeviceTierPagesAreReadInPlace) {
  CheckpointStore store(1, 1, device());
  ASSERT_TRUE(FreezeValue(store, 0, 0, 5.0f, 4).ok());
  const std::vector<int32_t> one = {0};
  auto staged = store.Stage(0, 0, one);
  ASSERT_TRUE(staged.ok());
  EXPECT_EQ((*staged)[0], &store.Checkpoints(0, 0)[0]->memory);
  EXPECT_EQ(store.stats().stagings, 0);
}

TEST_P(CheckpointStoreTest, DropsAndClearsReleaseTiersAndHotPages) {
  CheckpointStore store(2, 1, device(), {.device_bytes = kPageBytes, .hot_pages = 4});
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(FreezeValue(store, 0, 0, 1.0f + i, 4 * (i + 1)).ok());
  ASSERT_TRUE(FreezeValue(store, 1, 0, 7.0f, 4).ok());
  const std::vector<int32_t> host_pages = {1, 2};
  ASSERT_TRUE(store.Stage(0, 0, host_pages).ok());
  EXPECT_EQ(store.stats().hot_pages, 2);

  store.DropNewest(0, 0, 1);  // a host page and its staged copy
  EXPECT_EQ(store.Checkpoints(0, 0).size(), 2u);
  EXPECT_EQ(store.stats().host_pages, 2);  // slot 0's page 1 and slot 1's page
  EXPECT_EQ(store.stats().hot_pages, 1);

  store.Clear(0);
  EXPECT_TRUE(store.Checkpoints(0, 0).empty());
  EXPECT_EQ(store.stats().hot_pages, 0);
  EXPECT_EQ(store.stats().device_pages, 0);
  EXPECT_EQ(store.stats().host_pages, 1);
  store.Clear(1);
  EXPECT_EQ(store.bytes(), 0);
  // The device tier has room again.
  ASSERT_TRUE(FreezeValue(store, 0, 0, 3.0f, 4).ok());
  EXPECT_EQ(store.Checkpoints(0, 0)[0]->tier, CheckpointTier::kDevice);
}

TEST_P(CheckpointStoreTest, AFullStoreRefusesWithBothBudgets) {
  CheckpointStore store(1, 3, device(), {.device_bytes = kPageBytes, .host_bytes = kPageBytes});
  ASSERT_TRUE(FreezeValue(store, 0, 2, 1.0f, 4).ok());
  ASSERT_TRUE(FreezeValue(store, 0, 2, 2.0f, 8).ok());
  const absl::Status full = FreezeValue(store, 0, 2, 3.0f, 12);
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(full.message(), "layer 2")) << full;
  EXPECT_TRUE(absl::StrContains(full.message(), "device tier (96 of 96 bytes used)")) << full;
  EXPECT_TRUE(absl::StrContains(full.message(), "host tier (96 of 96 bytes used)")) << full;
  EXPECT_EQ(store.Checkpoints(0, 2).size(), 2u);  // nothing half-added
  EXPECT_EQ(store.bytes(), 2 * kPageBytes + 2 * kHs * kK * 4 + 16 * kHs * kK * 4);  // + the list's first key buffer
}

TEST_P(CheckpointStoreTest, StagingAnIndexOutOfRangeIsAnError) {
  CheckpointStore store(1, 1, device(), {.device_bytes = 0});
  ASSERT_TRUE(FreezeValue(store, 0, 0, 1.0f, 4).ok());
  const std::vector<int32_t> bad = {0, 1};
  auto staged = store.Stage(0, 0, bad);
  EXPECT_EQ(staged.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_TRUE(absl::StrContains(staged.status().message(), "checkpoint 1 of slot 0 layer 0")) << staged.status();
}

TEST_P(CheckpointStoreTest, SharedPagesLiveUntilTheLastReferenceGoes) {
  CheckpointStore store(2, 1, device(), {.device_bytes = kPageBytes});
  ASSERT_TRUE(FreezeValue(store, 0, 0, 1.0f, 4).ok());
  ASSERT_TRUE(FreezeValue(store, 0, 0, 2.0f, 8).ok());
  const std::vector<const McCheckpoint*> pages(store.Checkpoints(0, 0).begin(), store.Checkpoints(0, 0).end());
  for (const McCheckpoint* p : pages) store.Retain(p);  // a prefix-cache entry
  ASSERT_TRUE(store.Adopt(1, 0, pages).ok());            // another request resumes from it
  ASSERT_EQ(store.PooledKeys(1, 0).size(), 2u);           // with its own side-by-side copy of their keys
  EXPECT_EQ(FirstValue(store.PooledKeys(1, 0)[1]), -2.0f);
  EXPECT_EQ(pages[0]->running_refs, 2);
  EXPECT_EQ(store.stats().referenced_pages, 2);
  EXPECT_FALSE(store.AllOnDevice(1, 0));  // page 2 is on the host tier, in the adopted list too
  ASSERT_TRUE(store.SanityCheck().ok()) << store.SanityCheck();

  store.Clear(0);
  store.Clear(1);
  EXPECT_EQ(store.stats().referenced_pages, 0);
  EXPECT_EQ(store.stats().device_pages + store.stats().host_pages, 2);  // the index still holds them
  ASSERT_TRUE(store.SanityCheck().ok()) << store.SanityCheck();
  for (const McCheckpoint* p : pages) store.Release(p);
  EXPECT_EQ(store.bytes(), 0);
  EXPECT_EQ(store.stats().device_pages + store.stats().host_pages, 0);
  ASSERT_TRUE(store.SanityCheck().ok()) << store.SanityCheck();
}

TEST_P(CheckpointStoreTest, AFullStoreRefusesUntilItsOwnerDropsAnIndexReferenceAndNeverFreesAReferencedPage) {
  CheckpointStore store(2, 1, device(), {.device_bytes = kPageBytes, .host_bytes = kPageBytes});
  ASSERT_TRUE(FreezeValue(store, 0, 0, 1.0f, 4).ok());  // device tier
  ASSERT_TRUE(FreezeValue(store, 1, 0, 2.0f, 4).ok());  // host tier
  const McCheckpoint* cached = store.Checkpoints(1, 0)[0];
  store.Retain(cached);
  store.Clear(1);  // now only the index holds slot 1's page
  // Both tiers full: the store says so (it never calls its owner back) and a Freeze is refused.
  const int64_t one_page[] = {kPageBytes};
  EXPECT_FALSE(store.HasRoomFor(one_page));
  const absl::Status refused = FreezeValue(store, 0, 0, 3.0f, 8);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  // The owner (the runner) evicts the index's entry: room on the host tier.
  store.Release(cached);
  EXPECT_TRUE(store.HasRoomFor(one_page));
  const int64_t two_pages[] = {kPageBytes, kPageBytes};
  EXPECT_FALSE(store.HasRoomFor(two_pages));
  ASSERT_TRUE(FreezeValue(store, 0, 0, 3.0f, 8).ok());
  EXPECT_EQ(store.Checkpoints(0, 0)[1]->tier, CheckpointTier::kHost);
  // Everything left is referenced by slot 0: nothing can be dropped, the store refuses.
  EXPECT_FALSE(store.HasRoomFor(one_page));
  const absl::Status full = FreezeValue(store, 0, 0, 4.0f, 12);
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted) << full;
  EXPECT_EQ(FirstValue(store.Checkpoints(0, 0)[0]->memory), 1.0f);  // referenced pages intact
  ASSERT_TRUE(store.SanityCheck().ok()) << store.SanityCheck();
}

// The list's pooled keys side by side: row i is page i's key, in one buffer (consecutive rows kHs·kK
// floats apart) that grows past its first 16 rows, shrinks with drops and is freed by Clear; the
// memories' views follow the list the same way.
TEST_P(CheckpointStoreTest, PooledKeysAndMemoryViewsSitSideBySideInListOrder) {
  CheckpointStore store(2, 1, device(), {.device_bytes = 8 * kPageBytes});
  constexpr int kPages = 40;
  for (int i = 0; i < kPages; ++i) ASSERT_TRUE(FreezeValue(store, 1, 0, 1.0f + i, 4 * (i + 1)).ok());
  const auto keys = store.PooledKeys(1, 0);
  const auto memories = store.Memories(1, 0);
  ASSERT_EQ(keys.size(), static_cast<size_t>(kPages));
  ASSERT_EQ(memories.size(), static_cast<size_t>(kPages));
  for (int i = 0; i < kPages; ++i) {
    EXPECT_EQ(FirstValue(memories[i]), 1.0f + i) << i;
    EXPECT_EQ(memories[i].device(), store.Checkpoints(1, 0)[i]->memory.device()) << i;  // on the page's tier
    EXPECT_EQ(keys[i].shape(), (kernels::Shape{kHs, kK}));
    EXPECT_EQ(keys[i].device(), device());
    EXPECT_EQ(FirstValue(keys[i]), -(1.0f + i)) << i;
    if (i > 0) EXPECT_EQ(static_cast<const char*>(kernels::RawData(keys[i])) -
                             static_cast<const char*>(kernels::RawData(keys[i - 1])), kHs * kK * 4) << i;
  }
  EXPECT_EQ(store.stats().key_block_bytes, 64 * kHs * kK * 4);  // 16 → 32 → 64 rows
  EXPECT_TRUE(store.PooledKeys(0, 0).empty());
  ASSERT_TRUE(store.SanityCheck().ok()) << store.SanityCheck();

  store.DropNewest(1, 0, 3);
  ASSERT_EQ(store.PooledKeys(1, 0).size(), static_cast<size_t>(kPages - 3));
  ASSERT_EQ(store.Memories(1, 0).size(), static_cast<size_t>(kPages - 3));
  ASSERT_TRUE(FreezeValue(store, 1, 0, 100.0f, 4 * kPages).ok());  // reuses the freed row
  EXPECT_EQ(FirstValue(store.PooledKeys(1, 0).back()), -100.0f);
  EXPECT_EQ(FirstValue(store.Memories(1, 0).back()), 100.0f);
  EXPECT_EQ(FirstValue(store.PooledKeys(1, 0)[kPages - 4]), -(1.0f + kPages - 4));
  ASSERT_TRUE(store.SanityCheck().ok()) << store.SanityCheck();

  store.Clear(1);
  EXPECT_TRUE(store.PooledKeys(1, 0).empty());
  EXPECT_TRUE(store.Memories(1, 0).empty());
  EXPECT_EQ(store.stats().key_block_bytes, 0);
  ASSERT_TRUE(store.SanityCheck().ok()) << store.SanityCheck();
}

INSTANTIATE_TEST_SUITE_P(Devices, CheckpointStoreTest, ::testing::Values(Device::kCpu, Device::kCudaEmu),
                         [](const auto& info) { return info.param == Device::kCpu ? "cpu" : "cuda_emu"; });

}  // namespace
}  // namespace mcserve::engine
