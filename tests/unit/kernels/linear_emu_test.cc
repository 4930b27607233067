// Linear on the CUDA emulator (device runtime Gemm) against the CPU backend: F32/BF16/F16 weights,
// GEMV-sized and GEMM-sized batches with odd sizes, accumulate, k = 0, both emulator schedules
// bit-identical, validation still applies on cuda-emu.
// Tolerance: both sum k products in F32 in different orders (AVX GEMV / OpenBLAS), so per element
// |got − want| ≤ 2e-7 · k · Σ_k |x·w| + 1e-6.
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
#include "kernels/linear/linear.h"
#include "tests/unit/kernels/emu_test_util.h"
#include "tests/unit/kernels/param_printers.h"

namespace mcserve::kernels {
namespace {

// The device under test: cuda-emu, or cuda with MCSERVE_TEST_DEVICE=cuda (emu_test_device.h).
const Device kEmu = DeviceUnderTest();

struct Case {
  int64_t m, k, n;
};
const Case kCases[] = {{1, 1, 1}, {1, 37, 19}, {3, 64, 33}, {8, 100, 7}, {9, 70, 130}, {20, 257, 65}};

std::vector<float> LinearOn(Device d, const std::vector<float>& x, const std::vector<uint8_t>& w, DType w_dtype,
                            const std::vector<float>& out0, const Case& c, bool accumulate) {
  Tensor xt = *Tensor::FromHost(x, {c.m, c.k}, d);
  Tensor wt = RawTensor(w.data(), w_dtype, {c.n, c.k}, d);
  Tensor out = *Tensor::FromHost(out0, {c.m, c.n}, d);
  absl::Status s = Linear(Context{.device = d}, {.x = &xt, .w = &wt, .out = &out, .accumulate = accumulate});
  EXPECT_TRUE(s.ok()) << s;
  return *out.ToHostF32();
}

class LinearEmuTest : public testing::TestWithParam<DType> {};

TEST_P(LinearEmuTest, MatchesCpu) {
  const DType w_dtype = GetParam();
  uint32_t seed = 51;
  for (const Case& c : kCases) {
    const std::vector<float> x = RandomVector(c.m * c.k, seed++);
    const std::vector<uint8_t> w = RandomRaw(c.n * c.k, w_dtype, seed++);
    const std::vector<float> out0 = RandomVector(c.m * c.n, seed++);
    // Σ_k |x·w| per output, for the tolerance (weights widened on the CPU).
    Tensor w_cpu = RawTensor(w.data(), w_dtype, {c.n, c.k}, Device::kCpu);
    const std::vector<float> wf = *w_cpu.ToHostF32();
    for (bool accumulate : {false, true}) {
      const std::vector<float> want = LinearOn(Device::kCpu, x, w, w_dtype, out0, c, accumulate);
      const std::vector<float> got = RunBothSchedules([&] { return LinearOn(kEmu, x, w, w_dtype, out0, c, accumulate); });
      ASSERT_EQ(got.size(), want.size());
      for (int64_t i = 0; i < c.m; ++i) {
        for (int64_t j = 0; j < c.n; ++j) {
          double abs_sum = 0.0;
          for (int64_t q = 0; q < c.k; ++q) abs_sum += std::fabs(x[i * c.k + q] * wf[j * c.k + q]);
          const double tol = 2e-7 * c.k * abs_sum + 1e-6;
          ASSERT_NEAR(got[i * c.n + j], want[i * c.n + j], tol)
              << "m " << c.m << " k " << c.k << " n " << c.n << " acc " << accumulate << " at " << i << "," << j;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllWeightTypes, LinearEmuTest, testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                         [](const testing::TestParamInfo<DType>& info) { return std::string(DTypeName(info.param)); });

TEST(LinearEmuEdgeTest, KnownValuesAndEmptyReduction) {
  // x = [1, 2], w = [[1, 0], [3, 4]] -> out = [1, 11]; accumulating adds that to out.
  Tensor x = *Tensor::FromHost(std::vector<float>{1.0f, 2.0f}, {1, 2}, kEmu);
  Tensor w = *Tensor::FromHost(std::vector<float>{1.0f, 0.0f, 3.0f, 4.0f}, {2, 2}, kEmu);
  Tensor out = *Tensor::FromHost(std::vector<float>{10.0f, 20.0f}, {1, 2}, kEmu);
  Context ctx{.device = kEmu};
  ASSERT_TRUE(Linear(ctx, {.x = &x, .w = &w, .out = &out, .accumulate = true}).ok());
  EXPECT_EQ(*out.ToHostF32(), (std::vector<float>{11.0f, 31.0f}));
  ASSERT_TRUE(Linear(ctx, {.x = &x, .w = &w, .out = &out}).ok());
  EXPECT_EQ(*out.ToHostF32(), (std::vector<float>{1.0f, 11.0f}));
  // k = 0: out = 0, or unchanged when accumulating.
  Tensor x0 = *Tensor::Zeros(DType::kF32, {2, 0}, kEmu), w0 = *Tensor::Zeros(DType::kF32, {3, 0}, kEmu);
  Tensor o0 = *Tensor::FromHost(std::vector<float>(6, 5.0f), {2, 3}, kEmu);
  ASSERT_TRUE(Linear(ctx, {.x = &x0, .w = &w0, .out = &o0, .accumulate = true}).ok());
  EXPECT_EQ(*o0.ToHostF32(), std::vector<float>(6, 5.0f));
  ASSERT_TRUE(Linear(ctx, {.x = &x0, .w = &w0, .out = &o0}).ok());
  EXPECT_EQ(*o0.ToHostF32(), std::vector<float>(6, 0.0f));
  // m = 0.
  Tensor xe = *Tensor::Zeros(DType::kF32, {0, 2}, kEmu), oe = *Tensor::Zeros(DType::kF32, {0, 2}, kEmu);
  EXPECT_TRUE(Linear(ctx, {.x = &xe, .w = &w, .out = &oe}).ok());
}

TEST(LinearEmuEdgeTest, InvalidInputFailsOnEmu) {
  Context ctx{.device = kEmu};
  Tensor x = *Tensor::Zeros(DType::kF32, {2, 4}, kEmu), w = *Tensor::Zeros(DType::kBF16, {3, 5}, kEmu);
  Tensor out = *Tensor::Zeros(DType::kF32, {2, 3}, kEmu);
  EXPECT_EQ(Linear(ctx, {.x = &x, .w = &w, .out = &out}).code(), absl::StatusCode::kInvalidArgument);
  Tensor w_cpu = *Tensor::Zeros(DType::kF32, {3, 4}, Device::kCpu);
  EXPECT_EQ(Linear(ctx, {.x = &x, .w = &w_cpu, .out = &out}).code(), absl::StatusCode::kInvalidArgument);
  Tensor w_i32 = *Tensor::Zeros(DType::kI32, {3, 4}, kEmu);
  EXPECT_EQ(Linear(ctx, {.x = &x, .w = &w_i32, .out = &out}).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mcserve::kernels
