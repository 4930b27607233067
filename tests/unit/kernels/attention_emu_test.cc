// Attention on the CUDA emulator against the CPU backend: varlen batches mixing prefill chunks,
// decode rows and an empty sequence on scattered slots, chained calls through the caches, grouped
// heads, dh in {1, 7, 64, 128}, more cache positions than threads, large logits; both emulator
// schedules bit-identical; the device-side checks of slot ids and cached counts; the capacity limit.
#include <array>
#include <cmath>
#include <cstring>
#include <ostream>
#include <vector>

#include "gtest/gtest.h"
#include "attention_case.h"
#include "emu_test_util.h"

namespace mcserve::kernels {
namespace {

const std::vector<AttentionCall> kCalls = {
    {.lens = {5, 1, 0, 3}, .slots = {3, 0, 2, 1}, .cached = {0, 4, 7, 2}, .seed = 100},
    {.lens = {1, 1, 1}, .slots = {3, 0, 1}, .cached = {5, 5, 5}, .seed = 200},
    {.lens = {6, 2}, .slots = {2, 3}, .cached = {6, 6}, .seed = 300},
    {.lens = {4, 1}, .slots = {0, 1}, .cached = {0, 6}, .seed = 400},
};

// Every value is the CPU's arithmetic; only FMA contraction may differ.
constexpr float kTol = 2e-5f;

bool BitEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void CheckCase(const AttentionCase& c, const std::vector<AttentionCall>& calls, float tol = kTol) {
  const AttentionResult cpu = RunAttention(c, calls, Device::kCpu);
  ASSERT_TRUE(cpu.status.ok()) << cpu.status;
  const std::array<AttentionResult, 2> emu =
      RunSchedules([&] { return RunAttention(c, calls, DeviceUnderTest()); });
  for (const AttentionResult& r : emu) ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectNear(emu[0].out, cpu.out, tol, "out");
  EXPECT_EQ(emu[0].k_cache, cpu.k_cache);  // appends are copies
  EXPECT_EQ(emu[0].v_cache, cpu.v_cache);
  EXPECT_TRUE(BitEqual(emu[0].out, emu[1].out));
  EXPECT_TRUE(BitEqual(emu[0].k_cache, emu[1].k_cache));
  EXPECT_TRUE(BitEqual(emu[0].v_cache, emu[1].v_cache));
}

struct Heads {
  int64_t hq, hkv, dh;
};

void PrintTo(const Heads& h, std::ostream* os) { *os << "Hq=" << h.hq << " Hkv=" << h.hkv << " dh=" << h.dh; }

class AttentionEmuTest : public ::testing::TestWithParam<Heads> {};

TEST_P(AttentionEmuTest, MatchesTheCpu) {
  AttentionCase c;
  c.hq = GetParam().hq;
  c.hkv = GetParam().hkv;
  c.dh = GetParam().dh;
  c.Randomize(1);
  CheckCase(c, kCalls);
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionEmuTest,
                         ::testing::Values(Heads{2, 2, 1}, Heads{2, 2, 7}, Heads{2, 2, 64}, Heads{2, 2, 128},
                                           Heads{4, 2, 7}, Heads{4, 2, 64}, Heads{4, 1, 128}));

// 300 cache positions: each thread scores several, the maximum is combined across threads.
TEST(AttentionEmuLongTest, MorePositionsThanThreads) {
  AttentionCase c;
  c.hq = 2;
  c.hkv = 1;
  c.dh = 32;
  c.num_slots = 3;
  c.capacity = 300;
  c.Randomize(2);
  CheckCase(c, {{.lens = {3, 1, 0}, .slots = {2, 0, 1}, .cached = {290, 140, 300}, .seed = 10},
                {.lens = {1, 2}, .slots = {2, 0}, .cached = {293, 141}, .seed = 20}});
}

// Logits with a spread of ~85 (see attention_test.cc): finite, and the CPU's values.
TEST(AttentionEmuLongTest, LargeLogits) {
  AttentionCase c;
  c.dh = 64;
  c.magnitude = 16.0f;
  c.Randomize(3);
  for (float& x : c.k_cache) x *= 16.0f;
  CheckCase(c, kCalls);
}

// Runs one call on the device under test and returns it; caches start as c's.
AttentionResult RunOne(const AttentionCase& c, const AttentionCall& call) {
  return RunAttention(c, {call}, DeviceUnderTest());
}

// Rows of a bad sequence (only checked on the device: slot outside the pool, cached negative or
// too large) get NaN and write no cache; the good sequence beside it gets the CPU's result.
TEST(AttentionEmuDeviceChecksTest, BadSlotOrCachedWritesNanAndKeepsTheCaches) {
  AttentionCase c;
  c.Randomize(4);
  const AttentionCall good = {.lens = {3}, .slots = {1}, .cached = {2}, .seed = 5};
  const AttentionResult good_cpu = RunAttention(c, {good}, Device::kCpu);
  ASSERT_TRUE(good_cpu.status.ok());
  const int64_t good_rows = 3 * c.hq * c.dh;
  struct Bad {
    const char* name;
    int32_t slot, cached;
  };
  for (const Bad& bad : {Bad{"slot 9", 9, 0}, Bad{"slot -1", -1, 0}, Bad{"cached -1", 0, -1},
                         Bad{"cached past capacity", 0, 11}}) {
    // The bad sequence (2 rows) first, then the good one drawn from the same seed as `good`.
    AttentionInputs in = MakeAttentionInputs(c, 2, 77);
    const AttentionInputs g = MakeAttentionInputs(c, 3, 5);
    in.q.insert(in.q.end(), g.q.begin(), g.q.end());
    in.k.insert(in.k.end(), g.k.begin(), g.k.end());
    in.v.insert(in.v.end(), g.v.begin(), g.v.end());
    const AttentionResult r =
        RunOne(c, {.lens = {2, 3}, .slots = {bad.slot, 1}, .cached = {bad.cached, 2}, .inputs = in});
    ASSERT_TRUE(r.status.ok()) << bad.name << ": " << r.status;
    for (int64_t i = 0; i < static_cast<int64_t>(r.out.size()) - good_rows; ++i) {
      EXPECT_TRUE(std::isnan(r.out[i])) << bad.name << " [" << i << "]";
    }
    ExpectNear(std::vector<float>(r.out.end() - good_rows, r.out.end()), good_cpu.out, kTol, bad.name);
    EXPECT_EQ(r.k_cache, good_cpu.k_cache) << bad.name;
    EXPECT_EQ(r.v_cache, good_cpu.v_cache) << bad.name;
  }
}

TEST(AttentionEmuDeviceChecksTest, CapacityAboveTheSharedMemoryLimitIsUnimplemented) {
  AttentionCase c;
  c.hq = c.hkv = 1;
  c.dh = 1;
  c.num_slots = 1;
  c.capacity = 8193;
  c.Randomize(6);
  const AttentionResult r = RunOne(c, {.lens = {1}, .slots = {0}, .cached = {0}, .seed = 7});
  EXPECT_EQ(r.status.code(), absl::StatusCode::kUnimplemented) << r.status;
}

TEST(AttentionEmuDeviceChecksTest, InvalidInputFailsOnTheDevice) {
  const Device dev = DeviceUnderTest();
  Tensor q = *Tensor::Zeros(DType::kF32, {2, 2, 4}, dev);
  Tensor kv = *Tensor::Zeros(DType::kF32, {2, 1, 4}, dev);
  Tensor out = *Tensor::Zeros(DType::kF32, {2, 2, 4}, dev);
  Tensor k_cache = *Tensor::Zeros(DType::kF32, {1, 4, 1, 4}, dev);
  Tensor v_cache = *Tensor::Zeros(DType::kF32, {1, 4, 1, 4}, dev);
  Tensor cu = *Tensor::FromHostI32(std::vector<int32_t>{0, 2}, {2}, dev);
  Tensor slots = *Tensor::FromHostI32(std::vector<int32_t>{0}, {1}, dev);
  Tensor cached = *Tensor::FromHostI32(std::vector<int32_t>{1}, {1}, dev);
  const Context ctx{.device = dev};
  AttentionArgs a{.q = &q, .k = &kv, .v = &kv, .cached = &cached, .layout = {.cu_seqlens = &cu, .slot_ids = &slots},
                  .k_cache = &k_cache, .v_cache = &v_cache, .out = &out};
  EXPECT_TRUE(Attention(ctx, a).ok());
  Tensor cpu_cached = *Tensor::FromHostI32(std::vector<int32_t>{1}, {1}, Device::kCpu);
  AttentionArgs b = a;
  b.cached = &cpu_cached;
  EXPECT_EQ(Attention(ctx, b).code(), absl::StatusCode::kInvalidArgument);
  AttentionArgs wide = a;
  Tensor q_wide = *Tensor::Zeros(DType::kF32, {2, 2, 129}, dev);
  wide.q = &q_wide;
  EXPECT_EQ(Attention(ctx, wide).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mcserve::kernels
