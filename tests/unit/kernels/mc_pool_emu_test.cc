// McSegmentPool and McLevelPool on the CUDA emulator against the CPU backend: batches mixing
// sequences at different positions and slots, GQA head mapping, K not a multiple of the block size
// (and larger than one block), chained calls through the slot state, both emulator schedules
// bit-identical, validation on cuda-emu, and out-of-range device-side positions.
#include <cmath>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/emu/emu.h"
#include "kernels/mc_pool/mc_pool.h"
#include "random_inputs.h"
#include "tests/unit/kernels/emu_test_device.h"

namespace mcserve::kernels {
namespace {

// One call's host data. Sequence b has lens[b] rows, slot slots[b], first position first[b]
// (local index j for the segment pool, 1-based position n for the level pool).
struct PoolCase {
  bool logarithmic = false;
  int64_t hk = 2, hs = 4, k = 37, num_slots = 5, levels = 6, segment = 4;
  bool mean = true;
  std::vector<int32_t> lens, slots, first;
  std::vector<float> keys, state;  // [T, Hk, K]; [slots, Hs, K] or [slots, Hs, L, K]

  int64_t rows() const {
    int64_t t = 0;
    for (int32_t n : lens) t += n;
    return t;
  }
  Shape state_shape() const {
    return logarithmic ? Shape{num_slots, hs, levels, k} : Shape{num_slots, hs, k};
  }
  void Randomize(uint32_t seed) {
    keys = RandomVector(rows() * hk * k, seed);
    state = RandomVector(NumElements(state_shape()), seed + 1, -2.0f, 2.0f);
  }
};

struct PoolResult {
  absl::Status status;
  std::vector<float> out, state;
};

PoolResult RunPool(const PoolCase& c, Device dev) {
  const int64_t t = c.rows(), b = static_cast<int64_t>(c.lens.size());
  std::vector<int32_t> cu = {0};
  for (int32_t n : c.lens) cu.push_back(cu.back() + n);
  Tensor k = *Tensor::FromHost(c.keys, {t, c.hk, c.k}, dev);
  Tensor state = *Tensor::FromHost(c.state, c.state_shape(), dev);
  Tensor out = *Tensor::Zeros(DType::kF32, {t, c.hs, c.k}, dev);
  Tensor cu_t = *Tensor::FromHostI32(cu, {b + 1}, dev);
  Tensor slot_t = *Tensor::FromHostI32(c.slots, {b}, dev);
  Tensor first_t = *Tensor::FromHostI32(c.first, {b}, dev);
  const BatchLayout layout{.cu_seqlens = &cu_t, .slot_ids = &slot_t};
  const Context ctx{.device = dev};
  PoolResult r;
  if (c.logarithmic) {
    r.status = McLevelPool(ctx, {.k = &k, .layout = layout, .first_position = &first_t, .level_sums = &state,
                                 .mean = c.mean, .out = &out});
  } else {
    r.status = McSegmentPool(ctx, {.k = &k, .layout = layout, .first_local = &first_t, .segment_size = c.segment,
                                   .mean = c.mean, .pool_sum = &state, .out = &out});
  }
  r.out = *out.ToHostF32();
  r.state = *state.ToHostF32();
  return r;
}

// Element-wise math: the emulated kernel must match the CPU to ~1e-6 relative.
void ExpectClose(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-6f * std::max(1.0f, std::fabs(want[i]))) << what << " [" << i << "]";
  }
}

// Runs c on the CPU and on cuda-emu under both schedules; compares and returns the emulated result.
PoolResult CheckAgainstCpu(const PoolCase& c) {
  const PoolResult cpu = RunPool(c, Device::kCpu);
  EXPECT_TRUE(cpu.status.ok()) << cpu.status;
  auto [fwd, rev] = RunSchedules([&] { return RunPool(c, DeviceUnderTest()); });
  EXPECT_TRUE(fwd.status.ok()) << fwd.status;
  EXPECT_TRUE(rev.status.ok()) << rev.status;
  ExpectClose(fwd.out, cpu.out, "out");
  ExpectClose(fwd.state, cpu.state, "state");
  EXPECT_EQ(fwd.out, rev.out) << "schedules differ";
  EXPECT_EQ(fwd.state, rev.state) << "schedules differ";
  return fwd;
}

TEST(McPoolEmuTest, SegmentPoolMixedBatch) {
  for (bool mean : {true, false}) {
    PoolCase c;
    c.mean = mean;
    c.lens = {5, 1, 9, 0};
    c.slots = {3, 0, 4, 1};
    c.first = {2, 4, 1, 3};  // restarts inside every multi-row sequence
    c.Randomize(11);
    CheckAgainstCpu(c);
  }
}

TEST(McPoolEmuTest, SegmentPoolWideKeysAndChaining) {
  PoolCase c;
  c.hk = 1;
  c.hs = 2;
  c.k = 300;  // more than one 256-thread block pass
  c.num_slots = 2;
  c.segment = 3;
  c.lens = {4};
  c.slots = {1};
  c.first = {2};
  c.Randomize(12);
  const PoolResult step1 = CheckAgainstCpu(c);
  c.state = step1.state;  // next chunk continues from the emulated state
  c.first = {3};          // (2 − 1 + 4) % 3 + 1
  c.lens = {2};
  c.keys = RandomVector(2 * c.hk * c.k, 13);
  CheckAgainstCpu(c);
}

TEST(McPoolEmuTest, LevelPoolMixedBatch) {
  for (bool mean : {true, false}) {
    PoolCase c;
    c.logarithmic = true;
    c.mean = mean;
    c.lens = {7, 1, 20, 3};
    c.slots = {2, 4, 0, 3};
    c.first = {1, 16, 30, 61};  // crosses 32; last position 63 < 2^6
    c.Randomize(21);
    CheckAgainstCpu(c);
  }
}

TEST(McPoolEmuTest, LevelPoolChaining) {
  PoolCase c;
  c.logarithmic = true;
  c.k = 33;
  c.num_slots = 2;
  c.lens = {5, 3};
  c.slots = {1, 0};
  c.first = {1, 9};
  c.Randomize(22);
  const PoolResult step1 = CheckAgainstCpu(c);
  c.state = step1.state;
  c.first = {6, 12};
  c.lens = {1, 4};
  c.keys = RandomVector(5 * c.hk * c.k, 23);
  CheckAgainstCpu(c);
}

TEST(McPoolEmuTest, LevelPoolDevicePositionOutOfRangeGivesNaN) {
  PoolCase c;
  c.logarithmic = true;
  c.k = 5;
  c.levels = 3;
  c.lens = {3, 2};
  c.slots = {0, 1};
  c.first = {6, 1};  // positions 6, 7, 8: 8 ≥ 2^3 (not validated on the host for device tensors)
  c.Randomize(31);
  const PoolResult r = RunPool(c, DeviceUnderTest());
  ASSERT_TRUE(r.status.ok()) << r.status;
  for (int64_t i = 0; i < c.hs * c.k; ++i) {
    EXPECT_FALSE(std::isnan(r.out[1 * c.hs * c.k + i]));  // position 7 fine
    EXPECT_TRUE(std::isnan(r.out[2 * c.hs * c.k + i]));   // position 8 out of range
    EXPECT_FALSE(std::isnan(r.out[3 * c.hs * c.k + i]));  // other sequence fine
  }
}

TEST(McPoolEmuTest, RejectsBadInputOnCudaEmu) {
  const Device dev = DeviceUnderTest();
  Tensor k = *Tensor::Zeros(DType::kF32, {2, 2, 4}, dev);
  Tensor out = *Tensor::Zeros(DType::kF32, {2, 3, 4}, dev);  // Hs = 3 not a multiple of Hk = 2
  Tensor sum = *Tensor::Zeros(DType::kF32, {1, 3, 4}, dev);
  const int32_t cu[2] = {0, 2}, slot = 0, j = 1;
  Tensor cu_t = *Tensor::FromHostI32(cu, {2}, dev), slot_t = *Tensor::FromHostI32({&slot, 1}, {1}, dev);
  Tensor j_t = *Tensor::FromHostI32({&j, 1}, {1}, dev);
  const Context ctx{.device = dev};
  absl::Status s = McSegmentPool(ctx, {.k = &k, .layout = {.cu_seqlens = &cu_t, .slot_ids = &slot_t},
                                       .first_local = &j_t, .segment_size = 4, .pool_sum = &sum, .out = &out});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  Tensor levels = *Tensor::Zeros(DType::kF32, {1, 3, 63, 4}, dev);  // L > 62
  s = McLevelPool(ctx, {.k = &k, .layout = {.cu_seqlens = &cu_t, .slot_ids = &slot_t}, .first_position = &j_t,
                        .level_sums = &levels, .out = &out});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("McLevelPool"), std::string::npos);
}

}  // namespace
}  // namespace mcserve::kernels
