// HopeMemory on the CUDA emulator against the CPU backend, for every option: varlen batches mixing
// prefill chunks, decode rows and an empty sequence on scattered slots, chained calls through the slot
// state with phases that cut the anchor chunks, d and E over and under the block size, both emulator
// schedules bit-identical, and the device-side slot and phase checks.
#include <array>
#include <cmath>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "emu_test_util.h"
#include "gtest/gtest.h"
#include "hope_case.h"
#include "kernels/cuda/emu/emu.h"

namespace mcserve::kernels {
namespace {

using hope_case::Call;
using hope_case::Case;
using hope_case::Pool;
using hope_case::Result;

const std::vector<Call> kCalls = {
    {.lens = {5, 1, 0, 3}, .slots = {3, 0, 2, 1}, .seed = 100},
    {.lens = {1, 1, 1}, .slots = {0, 3, 1}, .seed = 200},
    {.lens = {7}, .slots = {2}, .seed = 300},
};

// Every value is the CPU's arithmetic; only FMA contraction may differ.
constexpr float kTol = 2e-5f;

bool BitEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The pool's tensors in one vector (for comparisons).
std::vector<float> Flat(const Pool& p) {
  std::vector<float> all;
  for (const std::vector<float>* v : {&p.memory, &p.mem_anchor, &p.momentum, &p.fast, &p.fast_anchor,
                                      &p.fast_momentum, &p.conv_q, &p.conv_k, &p.conv_v}) {
    all.insert(all.end(), v->begin(), v->end());
  }
  return all;
}

void CheckCase(const Case& c, const std::vector<Call>& calls = kCalls) {
  const Result cpu = hope_case::RunHope(c, calls, Device::kCpu);
  ASSERT_TRUE(cpu.status.ok()) << cpu.status;
  const std::array<Result, 2> emu = RunSchedules([&] { return hope_case::RunHope(c, calls, DeviceUnderTest()); });
  for (const Result& r : emu) ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectNear(emu[0].out, cpu.out, kTol, "out");
  ExpectNear(Flat(emu[0].pool), Flat(cpu.pool), kTol, "state");
  EXPECT_TRUE(BitEqual(emu[0].out, emu[1].out));
  EXPECT_TRUE(BitEqual(Flat(emu[0].pool), Flat(emu[1].pool)));
  EXPECT_NE(cpu.pool.memory, c.pool.memory);
}

struct Variant {
  const char* name;
  void (*apply)(Case&);
};
void PrintTo(const Variant& v, std::ostream* os) { *os << v.name; }

const Variant kVariants[] = {
    {"Defaults", [](Case&) {}},
    {"GeluSoftplusNoClamp",
     [](Case& c) {
       c.opt.activation = HopeActivation::kGelu;
       c.opt.eta_activation = HopeEtaActivation::kSoftplus;
       c.opt.eta_clamp = false;
     }},
    {"DgdHiddenReadAfterWrite",
     [](Case& c) {
       c.opt.w1_rule = HopeW1Rule::kDgdHidden;
       c.opt.read_after_write = true;
     }},
    {"ReadAnchorMomentumConstantNoSkip",
     [](Case& c) {
       c.opt.read_anchor = true;
       c.opt.momentum = HopeMomentum::kConstant;
       c.with_skip = false;
     }},
    {"MomentumDataAdaptiveQ",
     [](Case& c) {
       c.opt.momentum = HopeMomentum::kData;
       c.opt.adaptive_q = true;
     }},
    {"ConvSize1Chunks1", [](Case& c) {
       c.opt.conv_size = 1;
       c.opt.chunk_size_other = 1;
       c.opt.chunk_size_mem = 1;
     }},
};

class HopeMemoryEmuTest : public ::testing::TestWithParam<Variant> {};

TEST_P(HopeMemoryEmuTest, MatchesTheCpu) {
  Case c;
  GetParam().apply(c);
  c.Randomize(1);
  CheckCase(c);
}

// HopeFeatures then HopeMemWrite on the emulator against the same halves on the CPU.
TEST_P(HopeMemoryEmuTest, HalvesMatchTheCpu) {
  Case c;
  GetParam().apply(c);
  c.Randomize(1);
  c.split = true;
  CheckCase(c);
}

INSTANTIATE_TEST_SUITE_P(Options, HopeMemoryEmuTest, ::testing::ValuesIn(kVariants),
                         [](const ::testing::TestParamInfo<Variant>& i) { return std::string(i.param.name); });

// d = 130 and E = 260 exceed the 128 threads of a block: every strided loop wraps.
TEST(HopeMemoryEmuWideTest, HeadWiderThanTheBlock) {
  Case c;
  c.opt.head_dim = 130;
  c.opt.w1_rule = HopeW1Rule::kDgdHidden;
  c.opt.momentum = HopeMomentum::kConstant;
  c.heads = 1;
  c.num_slots = 2;
  c.Randomize(2);
  CheckCase(c, {{.lens = {3, 2}, .slots = {1, 0}, .seed = 10}, {.lens = {1, 2}, .slots = {0, 1}, .seed = 20}});
}

// A slot id outside the pool or a negative phase (only checked on the device): NaN outputs, pool
// untouched.
TEST(HopeMemoryEmuTest, OutOfRangeSlotOnDeviceWritesNanAndKeepsState) {
  for (bool split : {false, true}) {
    Case c;
    c.Randomize(4);
    c.split = split;
    const Result r = hope_case::RunHope(c, {{.lens = {2}, .slots = {9}, .seed = 5}}, DeviceUnderTest());
    ASSERT_TRUE(r.status.ok()) << r.status;
    EXPECT_EQ(Flat(r.pool), Flat(c.pool));
    for (float o : r.out) EXPECT_TRUE(std::isnan(o));
  }
}

TEST(HopeMemoryEmuTest, NegativePhaseOnDeviceWritesNanAndKeepsState) {
  Case c;
  c.Randomize(5);
  c.pool.pos[1] = -3;  // phase −3 (RunHope passes pos mod C_o·C_mem, which keeps the sign)
  const Result r = hope_case::RunHope(c, {{.lens = {2}, .slots = {1}, .seed = 6}}, DeviceUnderTest());
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(Flat(r.pool), Flat(c.pool));
  for (float o : r.out) EXPECT_TRUE(std::isnan(o));
  const Result cpu = hope_case::RunHope(c, {{.lens = {2}, .slots = {1}, .seed = 6}}, Device::kCpu);
  EXPECT_EQ(cpu.status.code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mcserve::kernels
