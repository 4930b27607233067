// RmsNorm (plain and swish-gated) on the CUDA emulator against the CPU backend: F32/BF16/F16
// weights, row widths below, at and above the block size and not multiples of a warp, in-place
// output, both emulator schedules bit-identical, validation still applies on cuda-emu.
// Tolerance: the row's sum of squares is reduced in a different order (block tree vs eight CPU
// partial sums), so results agree to 1e-5 relative (+1e-6 absolute).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "kernels/core/tensor_data.h"
#include "kernels/core/device_runtime.h"
#include "kernels/cuda/emu/emu.h"
#include "kernels/rms_norm/rms_norm.h"
#include "tests/unit/kernels/emu_test_util.h"
#include "tests/unit/kernels/param_printers.h"

namespace mcserve::kernels {
namespace {

// The device under test: cuda-emu, or cuda with MCSERVE_TEST_DEVICE=cuda (emu_test_device.h).
const Device kEmu = DeviceUnderTest();

struct Case {
  int64_t rows, n;
};
const Case kCases[] = {{1, 1}, {3, 5}, {4, 31}, {2, 32}, {5, 33}, {3, 256}, {6, 300}, {2, 1000}, {1, 2051}};

std::vector<float> RmsNormOn(Device d, const std::vector<float>& x, const std::vector<uint8_t>& w, DType w_dtype,
                             const std::vector<float>* gate, int64_t rows, int64_t n, bool in_place) {
  Tensor xt = *Tensor::FromHost(x, {rows, n}, d);
  Tensor wt = RawTensor(w.data(), w_dtype, {n}, d);
  std::optional<Tensor> gt;
  if (gate != nullptr) gt = *Tensor::FromHost(*gate, {rows, n}, d);
  Tensor out = in_place ? xt : *Tensor::Zeros(DType::kF32, {rows, n}, d);
  absl::Status s = RmsNorm(Context{.device = d}, {.x = &xt, .weight = &wt, .gate = gt ? &*gt : nullptr,
                                                   .eps = 1e-5f, .out = &out});
  EXPECT_TRUE(s.ok()) << s;
  return *out.ToHostF32();
}

class RmsNormEmuTest : public testing::TestWithParam<DType> {};

TEST_P(RmsNormEmuTest, MatchesCpu) {
  const DType w_dtype = GetParam();
  uint32_t seed = 11;
  for (const Case& c : kCases) {
    const std::vector<float> x = RandomVector(c.rows * c.n, seed++, -3.0f, 3.0f);
    const std::vector<float> g = RandomVector(c.rows * c.n, seed++, -4.0f, 4.0f);
    const std::vector<uint8_t> w = RandomRaw(c.n, w_dtype, seed++);
    for (bool gated : {false, true}) {
      for (bool in_place : {false, true}) {
        const std::vector<float>* gp = gated ? &g : nullptr;
        const std::vector<float> want = RmsNormOn(Device::kCpu, x, w, w_dtype, gp, c.rows, c.n, false);
        const std::vector<float> got =
            RunBothSchedules([&] { return RmsNormOn(kEmu, x, w, w_dtype, gp, c.rows, c.n, in_place); });
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size(); ++i) {
          ASSERT_NEAR(got[i], want[i], 1e-5f * std::fabs(want[i]) + 1e-6f)
              << "rows " << c.rows << " n " << c.n << " gated " << gated << " at " << i;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllWeightTypes, RmsNormEmuTest, testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                         [](const testing::TestParamInfo<DType>& info) { return std::string(DTypeName(info.param)); });

TEST(RmsNormEmuEdgeTest, KnownValuesAndEmpty) {
  // x = [3, 4]: mean(x²) = 12.5, so out = x / sqrt(12.5) · w.
  Tensor x = *Tensor::FromHost(std::vector<float>{3.0f, 4.0f}, {1, 2}, kEmu);
  Tensor w = *Tensor::FromHost(std::vector<float>{1.0f, 2.0f}, {2}, kEmu);
  Tensor out = *Tensor::Zeros(DType::kF32, {1, 2}, kEmu);
  ASSERT_TRUE(RmsNorm(Context{.device = kEmu}, {.x = &x, .weight = &w, .eps = 0.0f, .out = &out}).ok());
  const std::vector<float> o = *out.ToHostF32();
  EXPECT_NEAR(o[0], 3.0f / std::sqrt(12.5f), 1e-6f);
  EXPECT_NEAR(o[1], 8.0f / std::sqrt(12.5f), 1e-6f);
  Tensor e = *Tensor::Zeros(DType::kF32, {0, 2}, kEmu);
  EXPECT_TRUE(RmsNorm(Context{.device = kEmu}, {.x = &e, .weight = &w, .out = &e}).ok());
}

TEST(RmsNormEmuEdgeTest, InvalidInputFailsOnEmu) {
  Context ctx{.device = kEmu};
  Tensor x = *Tensor::Zeros(DType::kF32, {2, 4}, kEmu), out = *Tensor::Zeros(DType::kF32, {2, 4}, kEmu);
  Tensor w3 = *Tensor::Zeros(DType::kF32, {3}, kEmu), w4 = *Tensor::Zeros(DType::kF32, {4}, kEmu);
  Tensor bad_gate = *Tensor::Zeros(DType::kF32, {2, 3}, kEmu);
  Tensor w_cpu = *Tensor::Zeros(DType::kF32, {4}, Device::kCpu);
  EXPECT_EQ(RmsNorm(ctx, {.x = &x, .weight = &w3, .out = &out}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RmsNorm(ctx, {.x = &x, .weight = &w4, .gate = &bad_gate, .out = &out}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RmsNorm(ctx, {.x = &x, .weight = &w_cpu, .out = &out}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RmsNorm(ctx, {.x = &x, .weight = &w4, .eps = -1.0f, .out = &out}).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mcserve::kernels
