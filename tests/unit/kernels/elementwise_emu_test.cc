// Element-wise ops (Activation, Add, SwiGlu) on the CUDA emulator against the CPU backend: sizes
// that are not multiples of the block, aliasing outputs, both emulator schedules bit-identical,
// validation still applies on cuda-emu.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <vector>

#include "kernels/cuda/emu/emu.h"
#include "kernels/elementwise/elementwise.h"
#include "tests/unit/kernels/emu_test_util.h"

namespace mcserve::kernels {
namespace {

// The device under test: cuda-emu, or cuda with MCSERVE_TEST_DEVICE=cuda (emu_test_device.h).
const Device kEmu = DeviceUnderTest();

// Element-wise math is the same per element on both backends (tolerance for libm differences).
void ExpectClose(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-6f * std::fabs(want[i]) + 1e-30f) << "element " << i;
  }
}

const int64_t kSizes[][2] = {{1, 1}, {3, 7}, {5, 256}, {2, 300}, {17, 61}, {1, 70000}};

std::vector<float> ActivationOn(Device d, ActivationKind kind, float scale, const std::vector<float>& x,
                                const Shape& shape, bool in_place) {
  Tensor xt = *Tensor::FromHost(x, shape, d);
  Tensor out = in_place ? xt : *Tensor::Zeros(DType::kF32, shape, d);
  Context ctx{.device = d};
  absl::Status s = Activation(ctx, {.kind = kind, .x = &xt, .scale = scale, .out = &out});
  EXPECT_TRUE(s.ok()) << s;
  return *out.ToHostF32();
}

TEST(ElementwiseEmuTest, ActivationMatchesCpu) {
  const ActivationKind kinds[] = {ActivationKind::kIdentity, ActivationKind::kSilu, ActivationKind::kSigmoid,
                                  ActivationKind::kRelu, ActivationKind::kEluPlusOne, ActivationKind::kGelu,
                                  ActivationKind::kGeluTanh};
  uint32_t seed = 1;
  for (auto [m, n] : kSizes) {
    for (ActivationKind kind : kinds) {
      for (bool in_place : {false, true}) {
        const Shape shape = {m, n};
        const std::vector<float> x = RandomVector(m * n, seed++, -8.0f, 8.0f);
        const std::vector<float> want = ActivationOn(Device::kCpu, kind, 2.0f, x, shape, false);
        const std::vector<float> got =
            RunBothSchedules([&] { return ActivationOn(kEmu, kind, 2.0f, x, shape, in_place); });
        ExpectClose(got, want);
      }
    }
  }
}

TEST(ElementwiseEmuTest, AddMatchesCpu) {
  uint32_t seed = 100;
  for (auto [m, n] : kSizes) {
    const Shape shape = {m, n};
    const std::vector<float> a = RandomVector(m * n, seed++), b = RandomVector(m * n, seed++);
    auto run = [&](Device d, bool alias_b) {
      Tensor at = *Tensor::FromHost(a, shape, d), bt = *Tensor::FromHost(b, shape, d);
      Tensor out = alias_b ? bt : *Tensor::Zeros(DType::kF32, shape, d);
      absl::Status s = Add(Context{.device = d}, {.a = &at, .b = &bt, .out = &out});
      EXPECT_TRUE(s.ok()) << s;
      return *out.ToHostF32();
    };
    const std::vector<float> want = run(Device::kCpu, false);
    for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(want[i], a[i] + b[i]);
    ExpectClose(RunBothSchedules([&] { return run(kEmu, false); }), want);
    ExpectClose(RunBothSchedules([&] { return run(kEmu, true); }), want);
  }
}

TEST(ElementwiseEmuTest, SwiGluMatchesCpu) {
  uint32_t seed = 200;
  for (auto [m, n] : kSizes) {
    const Shape shape = {m, n};
    const std::vector<float> g = RandomVector(m * n, seed++, -6.0f, 6.0f), u = RandomVector(m * n, seed++);
    for (ActivationKind act : {ActivationKind::kSilu, ActivationKind::kGelu}) {
      auto run = [&](Device d, bool alias_gate) {
        Tensor gt = *Tensor::FromHost(g, shape, d), ut = *Tensor::FromHost(u, shape, d);
        Tensor out = alias_gate ? gt : *Tensor::Zeros(DType::kF32, shape, d);
        absl::Status s = SwiGlu(Context{.device = d}, {.gate = &gt, .up = &ut, .out = &out, .act = act});
        EXPECT_TRUE(s.ok()) << s;
        return *out.ToHostF32();
      };
      const std::vector<float> want = run(Device::kCpu, false);
      ExpectClose(RunBothSchedules([&] { return run(kEmu, false); }), want);
      ExpectClose(RunBothSchedules([&] { return run(kEmu, true); }), want);
    }
  }
}

TEST(ElementwiseEmuTest, EmptyTensorIsNoOp) {
  Tensor x = *Tensor::Zeros(DType::kF32, {0, 5}, kEmu), out = *Tensor::Zeros(DType::kF32, {0, 5}, kEmu);
  Context ctx{.device = kEmu};
  EXPECT_TRUE(Activation(ctx, {.kind = ActivationKind::kSilu, .x = &x, .out = &out}).ok());
  EXPECT_TRUE(Add(ctx, {.a = &x, .b = &x, .out = &out}).ok());
  EXPECT_TRUE(SwiGlu(ctx, {.gate = &x, .up = &x, .out = &out}).ok());
}

TEST(ElementwiseEmuTest, InvalidInputFailsOnEmu) {
  Context ctx{.device = kEmu};
  Tensor a = *Tensor::Zeros(DType::kF32, {2, 3}, kEmu), b = *Tensor::Zeros(DType::kF32, {3, 2}, kEmu);
  Tensor cpu = *Tensor::Zeros(DType::kF32, {2, 3}, Device::kCpu);
  Tensor out = *Tensor::Zeros(DType::kF32, {2, 3}, kEmu);
  EXPECT_EQ(Add(ctx, {.a = &a, .b = &b, .out = &out}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Add(ctx, {.a = &a, .b = &cpu, .out = &out}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Activation(ctx, {.kind = static_cast<ActivationKind>(99), .x = &a, .out = &out}).code(),
            absl::StatusCode::kInvalidArgument);
  Tensor r1 = *Tensor::Zeros(DType::kF32, {6}, kEmu), r1out = *Tensor::Zeros(DType::kF32, {6}, kEmu);
  EXPECT_EQ(SwiGlu(ctx, {.gate = &r1, .up = &r1, .out = &r1out}).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mcserve::kernels
