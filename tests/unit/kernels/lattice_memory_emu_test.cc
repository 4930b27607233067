// LatticeMemory on the CUDA emulator against the CPU backend, for every variant and option: varlen
// batches mixing prefill chunks, decode rows and an empty sequence on scattered slots, chained calls
// through the slot state, m and d over and under the block size, both emulator schedules
// bit-identical, and the device-side slot check.
#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/emu/emu.h"
#include "lattice_case.h"
#include "emu_test_util.h"

namespace mcserve::kernels {
namespace {

const std::vector<LatticeCall> kCalls = {
    {.lens = {5, 1, 0, 3}, .slots = {3, 0, 2, 1}, .seed = 100},
    {.lens = {1, 1, 1}, .slots = {0, 3, 1}, .seed = 200},
    {.lens = {6}, .slots = {2}, .seed = 300},
};

// Every value is the CPU's arithmetic; only FMA contraction may differ.
constexpr float kTol = 2e-5f;

bool BitEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void CheckCase(const LatticeCase& c) {
  const LatticeResult cpu = RunLattice(c, kCalls, Device::kCpu);
  ASSERT_TRUE(cpu.status.ok()) << cpu.status;
  const std::array<LatticeResult, 2> emu = RunSchedules([&] { return RunLattice(c, kCalls, DeviceUnderTest()); });
  for (const LatticeResult& r : emu) ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectNear(emu[0].out, cpu.out, kTol, "out");
  ExpectNear(emu[0].state, cpu.state, kTol, "state");
  EXPECT_TRUE(BitEqual(emu[0].out, emu[1].out));
  EXPECT_TRUE(BitEqual(emu[0].state, emu[1].state));
  EXPECT_NE(cpu.state, c.state);
}

TEST(LatticeMemoryEmuTest, DecSmallHeads) {
  LatticeCase c;
  c.Randomize(1);
  CheckCase(c);
}

TEST(LatticeMemoryEmuTest, DecWiderThanTheBlockAnalyticNormalized) {
  LatticeCase c;
  c.m = 130;  // more slots and columns than threads
  c.d = 140;
  c.heads = 1;
  c.analytic = c.normalized = true;
  c.Randomize(2);
  CheckCase(c);
}

TEST(LatticeMemoryEmuTest, EncAndSimWithAndWithoutForgetGate) {
  for (LatticeMemoryVariant v : {LatticeMemoryVariant::kEnc, LatticeMemoryVariant::kSim}) {
    for (bool forget : {true, false}) {
      LatticeCase c;
      c.variant = v;
      c.forget = forget;
      c.m = 16;
      c.d = 16;
      c.Randomize(3);
      CheckCase(c);
    }
  }
}

// A slot id outside the pool (only checked on the device): NaN outputs, pool untouched.
TEST(LatticeMemoryEmuTest, OutOfRangeSlotOnDeviceWritesNanAndKeepsState) {
  LatticeCase c;
  c.Randomize(4);
  const std::vector<LatticeCall> calls = {{.lens = {2}, .slots = {9}, .seed = 5}};
  const LatticeResult r = RunLattice(c, calls, DeviceUnderTest());
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.state, c.state);
  for (float o : r.out) EXPECT_TRUE(std::isnan(o));
}

TEST(LatticeMemoryEmuTest, InvalidInputFailsOnCudaEmu) {
  const Device dev = DeviceUnderTest();
  Tensor q = *Tensor::Zeros(DType::kF32, {2, 2, 3}, dev);
  Tensor v = *Tensor::Zeros(DType::kF32, {2, 2, 4}, dev);
  Tensor g = *Tensor::Zeros(DType::kF32, {2, 2}, dev);
  Tensor state = *Tensor::Zeros(DType::kF32, {1, 2, 3, 4}, dev);
  Tensor out = *Tensor::Zeros(DType::kF32, {2, 2, 4}, dev);
  Tensor cu = *Tensor::FromHostI32(std::vector<int32_t>{0, 2}, {2}, dev);
  Tensor slots = *Tensor::FromHostI32(std::vector<int32_t>{0}, {1}, dev);
  const Context ctx{.device = dev};
  LatticeMemoryArgs a{.q = &q, .k = &q, .v = &v, .gamma = &g, .layout = {.cu_seqlens = &cu, .slot_ids = &slots},
                      .state = &state, .out = &out};
  EXPECT_TRUE(LatticeMemory(ctx, a).ok());
  Tensor cpu_q = *Tensor::Zeros(DType::kF32, {2, 2, 3}, Device::kCpu);
  LatticeMemoryArgs b = a;
  b.q = &cpu_q;
  EXPECT_EQ(LatticeMemory(ctx, b).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mcserve::kernels
