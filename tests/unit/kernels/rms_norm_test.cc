// RmsNorm against a double loop: odd sizes, F32/BF16/F16 weights, swish gate, aliasing, threads.
#include "kernels/rms_norm/rms_norm.h"

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "random_inputs.h"
#include "kernels/cpu/thread_pool.h"
#include "tests/unit/kernels/param_printers.h"

namespace mcserve::kernels {
namespace {

// Inputs in [-2, 2).
std::vector<float> RandomInput(int64_t size, uint32_t seed) { return RandomVector(size, seed, -2.0f, 2.0f); }

// A [n] weight of `dtype` (read-only view) and the exact values it stores.
std::pair<Tensor, std::vector<float>> MakeVector(DType dtype, const std::vector<float>& values) {
  const int64_t n = values.size();
  if (dtype == DType::kF32) {
    auto data = std::make_shared<std::vector<float>>(values);
    return {Tensor::WrapHost(data->data(), dtype, {n}, data), values};
  }
  auto bits = std::make_shared<std::vector<uint16_t>>(n);
  std::vector<float> exact(n);
  for (int64_t i = 0; i < n; ++i) {
    if (dtype == DType::kBF16) {
      (*bits)[i] = F32ToBf16(values[i]);
      exact[i] = Bf16ToF32((*bits)[i]);
    } else {  // F16 from an exactly representable value: quantise to 1/1024 within (−2, 2)
      float q = std::round(values[i] * 512.0f) / 512.0f;
      uint16_t sign = q < 0 ? 0x8000 : 0;
      float a = std::fabs(q);
      uint16_t h = 0;
      if (a > 0) {
        int e;
        float frac = std::frexp(a, &e);  // a = frac · 2^e, frac in [0.5, 1)
        h = static_cast<uint16_t>(((e - 1 + 15) << 10) | static_cast<uint16_t>(std::lround((frac * 2 - 1) * 1024)));
      }
      (*bits)[i] = sign | h;
      exact[i] = F16ToF32((*bits)[i]);
      EXPECT_EQ(exact[i], q);
    }
  }
  return {Tensor::WrapHost(bits->data(), dtype, {n}, bits), exact};
}

void ExpectRmsNorm(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>* g, float eps,
                   const std::vector<float>& got, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[r * n + i]) * x[r * n + i];
    const double inv = 1.0 / std::sqrt(ss / n + eps);
    for (int64_t i = 0; i < n; ++i) {
      double want = x[r * n + i] * inv * w[i];
      if (g != nullptr) {
        double gv = (*g)[r * n + i];
        want *= gv / (1.0 + std::exp(-gv));
      }
      ASSERT_NEAR(got[r * n + i], want, 1e-5 * std::fabs(want) + 1e-6) << "row " << r << " col " << i;
    }
  }
}

class RmsNormDTypeTest : public testing::TestWithParam<DType> {};

TEST_P(RmsNormDTypeTest, MatchesDoubleLoop) {
  cpu::ThreadPool pool(2);
  for (cpu::ThreadPool* p : {static_cast<cpu::ThreadPool*>(nullptr), &pool}) {
    for (auto [rows, n] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {1, 7}, {7, 37}, {64, 256}, {300, 259}}) {
      for (bool gated : {false, true}) {
        SCOPED_TRACE(testing::Message() << "rows=" << rows << " n=" << n << " gated=" << gated);
        auto [w, w_exact] = MakeVector(GetParam(), RandomVector(n, 3, 0.5f, 1.5f));
        std::vector<float> xv = RandomInput(rows * n, 11), gv = RandomVector(rows * n, 12, -6.0f, 6.0f);
        auto x = *Tensor::FromHost(xv, {rows, n}, Device::kCpu);
        auto g = *Tensor::FromHost(gv, {rows, n}, Device::kCpu);
        auto out = *Tensor::Zeros(DType::kF32, {rows, n}, Device::kCpu);
        Context ctx;
        ctx.pool = p;
        ASSERT_TRUE(RmsNorm(ctx, {&x, &w, gated ? &g : nullptr, 1e-5f, &out}).ok());
        ExpectRmsNorm(xv, w_exact, gated ? &gv : nullptr, 1e-5f, *out.ToHostF32(), rows, n);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllWeightTypes, RmsNormDTypeTest, testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                         [](const testing::TestParamInfo<DType>& info) { return std::string(DTypeName(info.param)); });

TEST(RmsNormTest, OutMayAliasXOrGate) {
  const int64_t rows = 5, n = 19;
  auto [w, w_exact] = MakeVector(DType::kF32, RandomInput(n, 4));
  std::vector<float> xv = RandomInput(rows * n, 5), gv = RandomInput(rows * n, 6);
  auto x = *Tensor::FromHost(xv, {rows, n}, Device::kCpu);
  auto g = *Tensor::FromHost(gv, {rows, n}, Device::kCpu);
  ASSERT_TRUE(RmsNorm({}, {&x, &w, &g, 1e-6f, &x}).ok());
  ExpectRmsNorm(xv, w_exact, &gv, 1e-6f, *x.ToHostF32(), rows, n);
  auto x2 = *Tensor::FromHost(xv, {rows, n}, Device::kCpu);
  ASSERT_TRUE(RmsNorm({}, {&x2, &w, &g, 1e-6f, &g}).ok());
  ExpectRmsNorm(xv, w_exact, &gv, 1e-6f, *g.ToHostF32(), rows, n);
}

TEST(RmsNormTest, ZeroRowStaysFinite) {
  auto [w, w_exact] = MakeVector(DType::kF32, std::vector<float>(8, 1.0f));
  auto x = *Tensor::Zeros(DType::kF32, {1, 8}, Device::kCpu);
  ASSERT_TRUE(RmsNorm({}, {&x, &w, nullptr, 1e-6f, &x}).ok());
  EXPECT_EQ(*x.ToHostF32(), std::vector<float>(8, 0.0f));
}

TEST(RmsNormTest, RejectsBadArguments) {
  auto x = *Tensor::Zeros(DType::kF32, {2, 4}, Device::kCpu);
  auto w = *Tensor::Zeros(DType::kF32, {4}, Device::kCpu);
  auto w_bad = *Tensor::Zeros(DType::kF32, {5}, Device::kCpu);
  auto w_i32 = *Tensor::Zeros(DType::kI32, {4}, Device::kCpu);
  auto w_2d = *Tensor::Zeros(DType::kF32, {1, 4}, Device::kCpu);
  auto g_bad = *Tensor::Zeros(DType::kF32, {2, 3}, Device::kCpu);
  auto out_bad = *Tensor::Zeros(DType::kF32, {4, 2}, Device::kCpu);
  auto x_bf16 = *Tensor::Zeros(DType::kBF16, {2, 4}, Device::kCpu);
  auto x_1d = *Tensor::Zeros(DType::kF32, {4}, Device::kCpu);
  auto out = *Tensor::Zeros(DType::kF32, {2, 4}, Device::kCpu);
  const Context ctx;
  EXPECT_TRUE(RmsNorm(ctx, {&x, &w, nullptr, 1e-6f, &out}).ok());
  for (const RmsNormArgs& a : std::vector<RmsNormArgs>{{&x, &w_bad, nullptr, 1e-6f, &out},
                                                       {&x, &w_i32, nullptr, 1e-6f, &out},
                                                       {&x, &w_2d, nullptr, 1e-6f, &out},
                                                       {&x, &w, &g_bad, 1e-6f, &out},
                                                       {&x, &w, nullptr, 1e-6f, &out_bad},
                                                       {&x_bf16, &w, nullptr, 1e-6f, &out},
                                                       {&x_1d, &w, nullptr, 1e-6f, &out},
                                                       {&x, &w, nullptr, -1.0f, &out},
                                                       {&x, &w, nullptr, NAN, &out},
                                                       {&x, nullptr, nullptr, 1e-6f, &out},
                                                       {&x, &w, nullptr, 1e-6f, nullptr}}) {
    absl::Status s = RmsNorm(ctx, a);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  }
  Context cuda;
  cuda.device = Device::kCuda;
  EXPECT_FALSE(RmsNorm(cuda, {&x, &w, nullptr, 1e-6f, &out}).ok());  // no GPU here: never succeeds
}

}  // namespace
}  // namespace mcserve::kernels
