// L2Norm (L2 and sum normalisation) on the CUDA emulator against the CPU backend: row widths below,
// at and above the block size and not multiples of a warp, scale, in-place output, both emulator
// schedules bit-identical, validation still applies on cuda-emu.
// Tolerance: the row sum is reduced in a different order (block tree vs eight CPU partial sums), so
// results agree to 1e-5 relative (+1e-6 absolute); sum-norm inputs are positive (as after a feature map).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <vector>

#include "kernels/cuda/emu/emu.h"
#include "kernels/l2_norm/l2_norm.h"
#include "tests/unit/kernels/emu_test_util.h"

namespace mcserve::kernels {
namespace {

// The device under test: cuda-emu, or cuda with MCSERVE_TEST_DEVICE=cuda (emu_test_device.h).
const Device kEmu = DeviceUnderTest();

struct Case {
  int64_t rows, n;
};
const Case kCases[] = {{1, 1}, {3, 5}, {4, 31}, {2, 32}, {5, 33}, {3, 128}, {6, 257}, {2, 1000}};

std::vector<float> L2NormOn(Device d, RowNormKind kind, const std::vector<float>& x, int64_t rows, int64_t n,
                            float eps, float scale, bool in_place) {
  Tensor xt = *Tensor::FromHost(x, {rows, n}, d);
  Tensor out = in_place ? xt : *Tensor::Zeros(DType::kF32, {rows, n}, d);
  absl::Status s = L2Norm(Context{.device = d}, {.kind = kind, .x = &xt, .eps = eps, .scale = scale, .out = &out});
  EXPECT_TRUE(s.ok()) << s;
  return *out.ToHostF32();
}

TEST(L2NormEmuTest, MatchesCpu) {
  uint32_t seed = 21;
  for (RowNormKind kind : {RowNormKind::kL2, RowNormKind::kSum}) {
    const float eps = kind == RowNormKind::kL2 ? 1e-6f : 1e-4f;
    const float lo = kind == RowNormKind::kL2 ? -2.0f : 0.0f;
    for (const Case& c : kCases) {
      const std::vector<float> x = RandomVector(c.rows * c.n, seed++, lo, 2.0f);
      for (float scale : {1.0f, 0.125f}) {
        for (bool in_place : {false, true}) {
          const std::vector<float> want = L2NormOn(Device::kCpu, kind, x, c.rows, c.n, eps, scale, false);
          const std::vector<float> got =
              RunBothSchedules([&] { return L2NormOn(kEmu, kind, x, c.rows, c.n, eps, scale, in_place); });
          ASSERT_EQ(got.size(), want.size());
          for (size_t i = 0; i < got.size(); ++i) {
            ASSERT_NEAR(got[i], want[i], 1e-5f * std::fabs(want[i]) + 1e-6f)
                << "kind " << static_cast<int>(kind) << " rows " << c.rows << " n " << c.n << " at " << i;
          }
        }
      }
    }
  }
}

TEST(L2NormEmuTest, KnownValues) {
  // [3, 4] has L2 norm 5 and sum 7.
  const std::vector<float> x = {3.0f, 4.0f};
  const std::vector<float> l2 = RunBothSchedules([&] { return L2NormOn(kEmu, RowNormKind::kL2, x, 1, 2, 0.0f, 2.0f, false); });
  EXPECT_NEAR(l2[0], 1.2f, 1e-6f);
  EXPECT_NEAR(l2[1], 1.6f, 1e-6f);
  const std::vector<float> sum = RunBothSchedules([&] { return L2NormOn(kEmu, RowNormKind::kSum, x, 1, 2, 0.0f, 1.0f, false); });
  EXPECT_NEAR(sum[0], 3.0f / 7.0f, 1e-6f);
  EXPECT_NEAR(sum[1], 4.0f / 7.0f, 1e-6f);
}

TEST(L2NormEmuTest, InvalidInputFailsOnEmu) {
  Context ctx{.device = kEmu};
  Tensor x = *Tensor::Zeros(DType::kF32, {2, 4}, kEmu);
  Tensor wrong = *Tensor::Zeros(DType::kF32, {2, 5}, kEmu);
  Tensor cpu_out = *Tensor::Zeros(DType::kF32, {2, 4}, Device::kCpu);
  EXPECT_EQ(L2Norm(ctx, {.x = &x, .out = &wrong}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(L2Norm(ctx, {.x = &x, .out = &cpu_out}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(L2Norm(ctx, {.kind = static_cast<RowNormKind>(7), .x = &x, .out = &x}).code(),
            absl::StatusCode::kInvalidArgument);
  Tensor empty = *Tensor::Zeros(DType::kF32, {0, 4}, kEmu);
  EXPECT_TRUE(L2Norm(ctx, {.x = &empty, .out = &empty}).ok());
}

}  // namespace
}  // namespace mcserve::kernels
