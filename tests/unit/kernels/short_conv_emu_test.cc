// ShortConv on the CUDA emulator against the CPU backend: varlen batches mixing prefill chunks,
// decode rows and empty sequences on scattered slots, D not a multiple of the block (and over one
// block), F32/BF16/F16 weights and bias, W = 1 (no history), chained calls through the slot state,
// both emulator schedules bit-identical, and validation on cuda-emu.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/core/tensor_data.h"
#include "kernels/core/device_runtime.h"
#include "kernels/cuda/emu/emu.h"
#include "kernels/short_conv/short_conv.h"
#include "random_inputs.h"
#include "emu_test_util.h"

namespace mcserve::kernels {
namespace {

// Host bits of a 16-bit weight: bf16 rounded from `v`, or a random normal half of magnitude < 2.
std::vector<uint16_t> SixteenBit(const std::vector<float>& v, DType dtype, uint32_t seed) {
  std::vector<uint16_t> bits(v.size());
  std::mt19937 rng(seed);
  for (size_t i = 0; i < v.size(); ++i) {
    if (dtype == DType::kBF16) {
      bits[i] = F32ToBf16(v[i]);
    } else {  // sign | exponent 10..15 | mantissa
      bits[i] = static_cast<uint16_t>(((rng() & 1u) << 15) | ((10u + rng() % 6u) << 10) | (rng() & 0x3ffu));
    }
  }
  return bits;
}

// A weight tensor of `dtype` on `dev` holding `v` (F32) or SixteenBit(v, dtype, seed).
Tensor Weight(const std::vector<float>& v, Shape shape, DType dtype, Device dev, uint32_t seed) {
  if (dtype == DType::kF32) return *Tensor::FromHost(v, std::move(shape), dev);
  const std::vector<uint16_t> bits = SixteenBit(v, dtype, seed);
  Tensor t = *Tensor::Zeros(dtype, std::move(shape), dev);
  if (dev == Device::kCpu) {
    std::memcpy(RawData(t), bits.data(), bits.size() * 2);
  } else {
    EXPECT_TRUE((*RuntimeFor(dev))->CopyHostToDevice(RawData(t), bits.data(), bits.size() * 2).ok());
  }
  return t;
}

struct ConvCase {
  int64_t d = 150;  // two blocks of 128 channels, the second partial
  int width = 4;
  int64_t num_slots = 6;
  DType w_dtype = DType::kF32, b_dtype = DType::kF32;
  bool bias = true, silu = true;
  std::vector<float> w, b, state;  // [D, 1, W], [D], [slots, W−1, D]

  void Randomize(uint32_t seed) {
    w = RandomVector(d * width, seed, -0.7f, 0.7f);
    b = RandomVector(d, seed + 1);
    state = RandomVector(num_slots * (width - 1) * d, seed + 2, -2.0f, 2.0f);
  }
};

struct ConvResult {
  absl::Status status;
  std::vector<float> out, state;
};

// Runs the calls (lens, slots, seed of x) in sequence through one state pool on `dev`; returns the
// concatenated outputs and the final state.
struct Call {
  std::vector<int32_t> lens, slots;
  uint32_t seed;
};
ConvResult RunConv(const ConvCase& c, const std::vector<Call>& calls, Device dev) {
  Tensor w = Weight(c.w, {c.d, 1, c.width}, c.w_dtype, dev, 11);
  Tensor bias = Weight(c.b, {c.d}, c.b_dtype, dev, 12);
  Tensor state = *Tensor::FromHost(c.state, {c.num_slots, c.width - 1, c.d}, dev);
  const Context ctx{.device = dev};
  ConvResult r;
  for (const Call& call : calls) {
    std::vector<int32_t> cu = {0};
    for (int32_t n : call.lens) cu.push_back(cu.back() + n);
    const int64_t t = cu.back(), nb = static_cast<int64_t>(call.lens.size());
    Tensor x = *Tensor::FromHost(RandomVector(t * c.d, call.seed, -2.0f, 2.0f), {t, c.d}, dev);
    Tensor out = *Tensor::Zeros(DType::kF32, {t, c.d}, dev);
    Tensor cu_t = *Tensor::FromHostI32(cu, {nb + 1}, dev);
    Tensor slot_t = *Tensor::FromHostI32(call.slots, {nb}, dev);
    ShortConvArgs a{.x = &x, .weight = &w, .bias = c.bias ? &bias : nullptr, .silu = c.silu,
                    .layout = {.cu_seqlens = &cu_t, .slot_ids = &slot_t}, .state = &state, .out = &out};
    r.status = ShortConv(ctx, a);
    if (!r.status.ok()) return r;
    std::vector<float> o = *out.ToHostF32();
    r.out.insert(r.out.end(), o.begin(), o.end());
  }
  r.state = *state.ToHostF32();
  return r;
}

// CPU vs emulator under both schedules; the two schedules must agree bit for bit.
void CheckCase(const ConvCase& c, const std::vector<Call>& calls) {
  const ConvResult cpu = RunConv(c, calls, Device::kCpu);
  ASSERT_TRUE(cpu.status.ok()) << cpu.status;
  const std::array<ConvResult, 2> emu = RunSchedules([&] { return RunConv(c, calls, DeviceUnderTest()); });
  for (const ConvResult& r : emu) ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectNear(emu[0].out, cpu.out, 1e-6f, "out");
  ExpectNear(emu[0].state, cpu.state, 0.0f, "state");  // pure copies
  EXPECT_EQ(std::memcmp(emu[0].out.data(), emu[1].out.data(), emu[0].out.size() * 4), 0);
  EXPECT_EQ(emu[0].state, emu[1].state);
}

// Prefill chunks longer and shorter than the history, decode rows, an empty sequence, then a
// decode step over the same slots and a chunk on a fresh slot.
const std::vector<Call> kCalls = {
    {.lens = {5, 1, 0, 2, 1}, .slots = {4, 0, 2, 5, 1}, .seed = 100},
    {.lens = {1, 1, 1, 1}, .slots = {0, 4, 1, 5}, .seed = 101},
    {.lens = {7, 1}, .slots = {3, 4}, .seed = 102},
};

TEST(ShortConvEmuTest, F32WeightsMatchCpu) {
  ConvCase c;
  c.Randomize(1);
  CheckCase(c, kCalls);
}

TEST(ShortConvEmuTest, HalfWeightsNoSiluMatchCpu) {
  ConvCase c;
  c.d = 45;
  c.w_dtype = DType::kBF16;
  c.b_dtype = DType::kF16;
  c.silu = false;
  c.Randomize(2);
  CheckCase(c, kCalls);
  c.w_dtype = DType::kF16;
  c.b_dtype = DType::kBF16;
  c.bias = false;
  c.silu = true;
  CheckCase(c, kCalls);
}

TEST(ShortConvEmuTest, WidthOneAndWidthTwo) {
  ConvCase c;
  c.d = 33;
  c.width = 1;
  c.Randomize(3);
  CheckCase(c, kCalls);
  c.width = 2;
  c.Randomize(4);
  CheckCase(c, kCalls);
}

TEST(ShortConvEmuTest, StateIsActuallyUsedAndWritten) {
  // Guards against a kernel that ignores the history: a different initial state changes out.
  ConvCase c;
  c.d = 20;
  c.Randomize(5);
  const std::vector<Call> calls = {{.lens = {2}, .slots = {1}, .seed = 7}};
  const ConvResult a = RunConv(c, calls, DeviceUnderTest());
  ASSERT_TRUE(a.status.ok()) << a.status;
  for (float& s : c.state) s += 1.0f;
  const ConvResult b = RunConv(c, calls, DeviceUnderTest());
  ASSERT_TRUE(b.status.ok()) << b.status;
  EXPECT_NE(a.out, b.out);
  // Slot 1's last two history rows are now this call's two inputs, identical in both runs.
  const int64_t row = c.d, slot = (c.width - 1) * c.d;
  for (int64_t i = slot + row; i < 2 * slot; ++i) EXPECT_EQ(a.state[i], b.state[i]) << i;
}

TEST(ShortConvEmuTest, InvalidInputFailsOnCudaEmu) {
  const Device dev = DeviceUnderTest();
  const Context ctx{.device = dev};
  Tensor x = *Tensor::Zeros(DType::kF32, {3, 8}, dev);
  Tensor w = *Tensor::Zeros(DType::kF32, {8, 1, 4}, dev);
  Tensor state = *Tensor::Zeros(DType::kF32, {2, 3, 8}, dev);
  Tensor bad_state = *Tensor::Zeros(DType::kF32, {2, 2, 8}, dev);
  Tensor out = *Tensor::Zeros(DType::kF32, {3, 8}, dev);
  Tensor cu = *Tensor::FromHostI32(std::vector<int32_t>{0, 3}, {2}, dev);
  Tensor slots = *Tensor::FromHostI32(std::vector<int32_t>{1}, {1}, dev);
  Tensor bad_slots = *Tensor::FromHostI32(std::vector<int32_t>{2}, {1}, dev);
  ShortConvArgs a{.x = &x, .weight = &w, .layout = {.cu_seqlens = &cu, .slot_ids = &slots}, .state = &state,
                  .out = &out};
  EXPECT_TRUE(ShortConv(ctx, a).ok());
  ShortConvArgs b = a;
  b.state = &bad_state;
  EXPECT_EQ(ShortConv(ctx, b).code(), absl::StatusCode::kInvalidArgument);
  // Slot ids live on the device: checked by the kernel, which writes NaN and leaves the state alone.
  ASSERT_TRUE(state.CopyFromHost(RandomVector(state.numel(), 9)).ok());
  const std::vector<float> state_before = *state.ToHostF32();
  b = a;
  b.layout.slot_ids = &bad_slots;
  EXPECT_TRUE(ShortConv(ctx, b).ok());
  EXPECT_EQ(*state.ToHostF32(), state_before);
  const std::vector<float> nan_out = *out.ToHostF32();
  for (float o : nan_out) EXPECT_TRUE(std::isnan(o)) << o;
  b = a;
  b.out = &x;
  EXPECT_EQ(ShortConv(ctx, b).code(), absl::StatusCode::kInvalidArgument);
  Tensor cpu_out = *Tensor::Zeros(DType::kF32, {3, 8}, Device::kCpu);
  b = a;
  b.out = &cpu_out;
  EXPECT_EQ(ShortConv(ctx, b).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mcserve::kernels
