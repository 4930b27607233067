// Gate decay factors against double loops: softplus decay with F32/BF16/F16 parameters, log-sigmoid
// decay with and without clamp, extreme inputs (stability), validation.
#include "kernels/gate/gate.h"

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

// A [n] parameter of `dtype` and the exact values it stores. F16 values are quantised to 1/256
// within (−8, 8), which F16 represents exactly, and encoded from sign, exponent and mantissa.
std::pair<Tensor, std::vector<float>> MakeParam(DType dtype, std::vector<float> values) {
  const int64_t n = values.size();
  if (dtype == DType::kF32) {
    auto data = std::make_shared<std::vector<float>>(values);
    return {Tensor::WrapHost(data->data(), dtype, {n}, data), values};
  }
  auto bits = std::make_shared<std::vector<uint16_t>>(n);
  for (int64_t i = 0; i < n; ++i) {
    if (dtype == DType::kBF16) {
      (*bits)[i] = F32ToBf16(values[i]);
      values[i] = Bf16ToF32((*bits)[i]);
    } else {
      const float q = std::round(values[i] * 256.0f) / 256.0f;
      uint16_t h = q < 0 ? 0x8000 : 0;
      if (q != 0) {
        int e;
        const float frac = std::frexp(std::fabs(q), &e);
        h |= static_cast<uint16_t>(((e - 1 + 15) << 10) | std::lround((frac * 2 - 1) * 1024));
      }
      (*bits)[i] = h;
      values[i] = F16ToF32(h);
      EXPECT_EQ(values[i], q);
    }
  }
  return {Tensor::WrapHost(bits->data(), dtype, {n}, bits), values};
}

double Softplus(double x) { return x > 20 ? x : std::log1p(std::exp(x)); }
double LogSigmoid(double x) { return std::min(x, 0.0) - std::log1p(std::exp(-std::fabs(x))); }

void ExpectClose(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i])) << "element " << i;
    ASSERT_NEAR(got[i], want[i], 2e-5 * want[i] + 1e-7) << "element " << i;
  }
}

class SoftplusDecayTest : public testing::TestWithParam<DType> {};

TEST_P(SoftplusDecayTest, MatchesDoubleLoop) {
  cpu::ThreadPool pool(2);
  for (cpu::ThreadPool* p : {static_cast<cpu::ThreadPool*>(nullptr), &pool}) {
    for (auto [t, h] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {1, 7}, {7, 13}, {4096, 9}}) {
      SCOPED_TRACE(testing::Message() << "T=" << t << " H=" << h);
      // A_log spans log(1)..log(16) as in GDN init; dt_bias like softplus⁻¹ of dt in [1e-3, 0.1].
      auto [a_log, a_exact] = MakeParam(GetParam(), RandomVector(h, 1, 0.0f, 2.77f));
      auto [dt_bias, dt_exact] = MakeParam(GetParam(), RandomVector(h, 2, -6.9f, -2.25f));
      std::vector<float> xv = RandomVector(t * h, 3, -10.0f, 10.0f);
      xv[0] = 40.0f;  // softplus linear branch
      if (xv.size() > 1) xv[1] = -90.0f;  // softplus underflow branch: α → 1
      auto x = *Tensor::FromHost(xv, {t, h}, Device::kCpu);
      auto out = *Tensor::Zeros(DType::kF32, {t, h}, Device::kCpu);
      Context ctx;
      ctx.pool = p;
      GateArgs args;
      args.kind = GateKind::kSoftplusDecay;
      args.x = &x;
      args.a_log = &a_log;
      args.dt_bias = &dt_bias;
      args.out = &out;
      ASSERT_TRUE(Gate(ctx, args).ok());
      std::vector<double> want(t * h);
      for (int64_t i = 0; i < t * h; ++i) {
        const int64_t head = i % h;
        want[i] = std::exp(-std::exp(static_cast<double>(a_exact[head])) * Softplus(xv[i] + double{dt_exact[head]}));
      }
      ExpectClose(*out.ToHostF32(), want);
      ASSERT_TRUE(Gate(ctx, {args.kind, &x, &a_log, &dt_bias, 16.0f, false, 0.0f, &x}).ok());  // in place
      ExpectClose(*x.ToHostF32(), want);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllParamTypes, SoftplusDecayTest, testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                         [](const testing::TestParamInfo<DType>& info) { return std::string(DTypeName(info.param)); });

TEST(LogSigmoidDecayTest, MatchesDoubleLoopWithAndWithoutClamp) {
  for (bool clamp : {false, true}) {
    for (auto [t, d] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {3, 37}, {64, 256}}) {
      std::vector<float> xv = RandomVector(t * d, 4, -12.0f, 12.0f);
      xv[0] = -200.0f;  // logsigmoid ≈ x: exp(−e^{200}) would overflow a naive form
      if (xv.size() > 1) xv[1] = 200.0f;
      auto x = *Tensor::FromHost(xv, {t, d}, Device::kCpu);
      auto out = *Tensor::Zeros(DType::kF32, {t, d}, Device::kCpu);
      GateArgs args;
      args.kind = GateKind::kLogSigmoidDecay;
      args.x = &x;
      args.normalizer = 16.0f;
      args.has_clamp_min = clamp;
      args.clamp_min = -0.3f;
      args.out = &out;
      ASSERT_TRUE(Gate({}, args).ok());
      std::vector<double> want(t * d);
      for (int64_t i = 0; i < t * d; ++i) {
        double g = LogSigmoid(xv[i]) / 16.0;
        if (clamp) g = std::max(g, -0.3);
        want[i] = std::exp(g);
      }
      ExpectClose(*out.ToHostF32(), want);
    }
  }
}

TEST(GateTest, RejectsBadArguments) {
  auto x = *Tensor::Zeros(DType::kF32, {3, 4}, Device::kCpu);
  auto out = *Tensor::Zeros(DType::kF32, {3, 4}, Device::kCpu);
  auto out_bad = *Tensor::Zeros(DType::kF32, {4, 3}, Device::kCpu);
  auto head = *Tensor::Zeros(DType::kF32, {4}, Device::kCpu);
  auto head_bad = *Tensor::Zeros(DType::kF32, {3}, Device::kCpu);
  auto head_i32 = *Tensor::Zeros(DType::kI32, {4}, Device::kCpu);
  auto x_bf16 = *Tensor::Zeros(DType::kBF16, {3, 4}, Device::kCpu);
  const Context ctx;
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  const auto sp = GateKind::kSoftplusDecay, ls = GateKind::kLogSigmoidDecay;
  EXPECT_TRUE(Gate(ctx, {sp, &x, &head, &head, 16.0f, false, 0.0f, &out}).ok());
  EXPECT_EQ(Gate(ctx, {sp, &x, &head_bad, &head, 16.0f, false, 0.0f, &out}).code(), kInvalid);
  EXPECT_EQ(Gate(ctx, {sp, &x, &head, &head_i32, 16.0f, false, 0.0f, &out}).code(), kInvalid);
  EXPECT_EQ(Gate(ctx, {sp, &x, nullptr, &head, 16.0f, false, 0.0f, &out}).code(), kInvalid);
  EXPECT_EQ(Gate(ctx, {sp, &x, &head, nullptr, 16.0f, false, 0.0f, &out}).code(), kInvalid);
  EXPECT_EQ(Gate(ctx, {sp, &x, &head, &head, 16.0f, false, 0.0f, &out_bad}).code(), kInvalid);
  EXPECT_EQ(Gate(ctx, {sp, &x_bf16, &head, &head, 16.0f, false, 0.0f, &out}).code(), kInvalid);
  EXPECT_TRUE(Gate(ctx, {ls, &x, nullptr, nullptr, 16.0f, true, -1.0f, &out}).ok());
  EXPECT_EQ(Gate(ctx, {ls, &x, nullptr, nullptr, 0.0f, false, 0.0f, &out}).code(), kInvalid);
  EXPECT_EQ(Gate(ctx, {ls, &x, nullptr, nullptr, -2.0f, false, 0.0f, &out}).code(), kInvalid);
  EXPECT_EQ(Gate(ctx, {ls, &x, nullptr, nullptr, 16.0f, true, NAN, &out}).code(), kInvalid);
  EXPECT_EQ(Gate(ctx, {static_cast<GateKind>(9), &x, &head, &head, 16.0f, false, 0.0f, &out}).code(), kInvalid);
  Context cuda;
  cuda.device = Device::kCuda;
  EXPECT_FALSE(Gate(cuda, {ls, &x, nullptr, nullptr, 16.0f, false, 0.0f, &out}).ok());  // no GPU here: never succeeds
}

}  // namespace
}  // namespace mcserve::kernels
