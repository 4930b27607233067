// Gate (softplus decay with F32/BF16/F16 a_log and dt_bias, log-sigmoid decay with and without
// clamp) on the CUDA emulator against the CPU backend: sizes not multiples of the block, in-place
// output, both emulator schedules bit-identical, validation still applies on cuda-emu.
// Tolerance: the same per-element math runs on both, so 1e-6 relative (+1e-30 absolute); on a GPU
// scaled by the decay's conditioning (ExpectClose).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/core/tensor_data.h"
#include "kernels/core/device_runtime.h"
#include "kernels/cuda/emu/emu.h"
#include "kernels/gate/gate.h"
#include "tests/unit/kernels/emu_test_util.h"

namespace mcserve::kernels {
namespace {

// The device under test: cuda-emu, or cuda with MCSERVE_TEST_DEVICE=cuda (emu_test_device.h).
const Device kEmu = DeviceUnderTest();

// 1e-6 relative on the emulator. On a GPU (SameMathAsCpu false) a decay exp(y) carries y's rounding
// (CUDA's log1pf/expf are not glibc's) times |y| = |ln decay|, so the bound grows by that factor.
void ExpectClose(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const float conditioning = SameMathAsCpu() || want[i] <= 0.0f ? 1.0f : 1.0f + std::fabs(std::log(want[i]));
    ASSERT_NEAR(got[i], want[i], 1e-6f * conditioning * std::fabs(want[i]) + 1e-30f) << what << " at " << i;
  }
}

const int64_t kShapes[][2] = {{1, 1}, {3, 7}, {5, 32}, {33, 9}, {300, 3}, {2, 700}};  // T, n

std::vector<float> SoftplusOn(Device d, const std::vector<float>& x, const std::vector<uint8_t>& a_log, DType a_dt,
                              const std::vector<uint8_t>& dt_bias, DType b_dt, int64_t t, int64_t n, bool in_place) {
  Tensor xt = *Tensor::FromHost(x, {t, n}, d);
  Tensor at = RawTensor(a_log.data(), a_dt, {n}, d), bt = RawTensor(dt_bias.data(), b_dt, {n}, d);
  Tensor out = in_place ? xt : *Tensor::Zeros(DType::kF32, {t, n}, d);
  absl::Status s = Gate(Context{.device = d},
                        {.kind = GateKind::kSoftplusDecay, .x = &xt, .a_log = &at, .dt_bias = &bt, .out = &out});
  EXPECT_TRUE(s.ok()) << s;
  return *out.ToHostF32();
}

TEST(GateEmuTest, SoftplusDecayMatchesCpu) {
  uint32_t seed = 31;
  const DType pairs[][2] = {{DType::kF32, DType::kF32}, {DType::kBF16, DType::kF32}, {DType::kF16, DType::kBF16},
                            {DType::kF32, DType::kF16}};
  for (auto [a_dt, b_dt] : pairs) {
    for (auto [t, n] : kShapes) {
      const std::vector<float> x = RandomVector(t * n, seed++, -25.0f, 25.0f);  // both softplus branches
      const std::vector<uint8_t> a_log = RandomRaw(n, a_dt, seed++), dt_bias = RandomRaw(n, b_dt, seed++);
      const std::vector<float> want = SoftplusOn(Device::kCpu, x, a_log, a_dt, dt_bias, b_dt, t, n, false);
      for (bool in_place : {false, true}) {
        ExpectClose(RunBothSchedules([&] { return SoftplusOn(kEmu, x, a_log, a_dt, dt_bias, b_dt, t, n, in_place); }),
                    want, "softplus");
      }
    }
  }
}

std::vector<float> LogSigmoidOn(Device d, const std::vector<float>& x, int64_t t, int64_t n, bool has_clamp,
                                bool in_place) {
  Tensor xt = *Tensor::FromHost(x, {t, n}, d);
  Tensor out = in_place ? xt : *Tensor::Zeros(DType::kF32, {t, n}, d);
  absl::Status s = Gate(Context{.device = d}, {.kind = GateKind::kLogSigmoidDecay, .x = &xt, .normalizer = 16.0f,
                                               .has_clamp_min = has_clamp, .clamp_min = -0.2f, .out = &out});
  EXPECT_TRUE(s.ok()) << s;
  return *out.ToHostF32();
}

TEST(GateEmuTest, LogSigmoidDecayMatchesCpu) {
  uint32_t seed = 41;
  for (auto [t, n] : kShapes) {
    const std::vector<float> x = RandomVector(t * n, seed++, -10.0f, 10.0f);
    for (bool has_clamp : {false, true}) {
      const std::vector<float> want = LogSigmoidOn(Device::kCpu, x, t, n, has_clamp, false);
      for (bool in_place : {false, true}) {
        ExpectClose(RunBothSchedules([&] { return LogSigmoidOn(kEmu, x, t, n, has_clamp, in_place); }), want,
                    "logsigmoid");
      }
    }
  }
}

TEST(GateEmuTest, KnownValue) {
  // a_log = 0, dt_bias = 0, x = 0: exp(−1 · log 2) = 0.5.
  const std::vector<float> zero = {0.0f};
  const std::vector<uint8_t> raw(4, 0);
  const std::vector<float> got = SoftplusOn(kEmu, zero, raw, DType::kF32, raw, DType::kF32, 1, 1, false);
  EXPECT_NEAR(got[0], 0.5f, 1e-7f);
}

TEST(GateEmuTest, InvalidInputFailsOnEmu) {
  Context ctx{.device = kEmu};
  Tensor x = *Tensor::Zeros(DType::kF32, {2, 4}, kEmu), out = *Tensor::Zeros(DType::kF32, {2, 4}, kEmu);
  Tensor h3 = *Tensor::Zeros(DType::kF32, {3}, kEmu), h4 = *Tensor::Zeros(DType::kF32, {4}, kEmu);
  Tensor h4_cpu = *Tensor::Zeros(DType::kF32, {4}, Device::kCpu);
  EXPECT_EQ(Gate(ctx, {.x = &x, .a_log = &h3, .dt_bias = &h4, .out = &out}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Gate(ctx, {.x = &x, .a_log = &h4, .out = &out}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Gate(ctx, {.x = &x, .a_log = &h4, .dt_bias = &h4_cpu, .out = &out}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Gate(ctx, {.kind = GateKind::kLogSigmoidDecay, .x = &x, .normalizer = 0.0f, .out = &out}).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mcserve::kernels
