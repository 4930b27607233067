// Activation, Add and SwiGlu against double loops: every kind, odd sizes, threads, aliasing, validation.
#include "kernels/elementwise/elementwise.h"

#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/thread_pool.h"

namespace mcserve::kernels {
namespace {

std::vector<float> RandomVector(int64_t size, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-8.0f, 8.0f);
  std::vector<float> v(size);
  for (float& f : v) f = u(rng);
  v[0] = 0.0f;
  if (size > 2) {
    v[1] = -100.0f;  // saturating tails
    v[2] = 100.0f;
  }
  return v;
}

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

double RefActivation(ActivationKind kind, double x) {
  switch (kind) {
    case ActivationKind::kIdentity: return x;
    case ActivationKind::kSilu: return x * Sigmoid(x);
    case ActivationKind::kSigmoid: return Sigmoid(x);
    case ActivationKind::kRelu: return x > 0 ? x : 0.0;
    case ActivationKind::kEluPlusOne: return x > 0 ? x + 1.0 : std::exp(x);
    case ActivationKind::kGelu: return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case ActivationKind::kGeluTanh:
      return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
  }
  return NAN;
}

void ExpectNear(const std::vector<float>& got, const std::function<double(int64_t)>& want) {
  for (size_t i = 0; i < got.size(); ++i) {
    const double w = want(i);
    ASSERT_NEAR(got[i], w, 1e-5 * std::fabs(w) + 1e-7) << "element " << i;
  }
}

const std::vector<Shape>& Shapes() {
  static const auto* shapes = new std::vector<Shape>{{1, 1}, {1, 7}, {7, 37}, {3, 5, 11}, {301, 257}};
  return *shapes;
}

TEST(ActivationTest, EveryKindMatchesDoubleLoop) {
  cpu::ThreadPool pool(2);
  for (cpu::ThreadPool* p : {static_cast<cpu::ThreadPool*>(nullptr), &pool}) {
    for (const Shape& shape : Shapes()) {
      for (ActivationKind kind : {ActivationKind::kIdentity, ActivationKind::kSilu, ActivationKind::kSigmoid,
                                  ActivationKind::kRelu, ActivationKind::kEluPlusOne, ActivationKind::kGelu,
                                  ActivationKind::kGeluTanh}) {
        for (float scale : {1.0f, 2.0f, -0.5f}) {
          SCOPED_TRACE(testing::Message() << "kind " << static_cast<int>(kind) << " shape " << ShapeString(shape)
                                          << " scale " << scale);
          std::vector<float> xv = RandomVector(NumElements(shape), 21);
          auto x = *Tensor::FromHost(xv, shape, Device::kCpu);
          auto out = *Tensor::Zeros(DType::kF32, shape, Device::kCpu);
          Context ctx;
          ctx.pool = p;
          ASSERT_TRUE(Activation(ctx, {kind, &x, scale, &out}).ok());
          ExpectNear(*out.ToHostF32(), [&](int64_t i) { return scale * RefActivation(kind, xv[i]); });
        }
      }
    }
  }
}

TEST(ActivationTest, InPlace) {
  std::vector<float> xv = RandomVector(99, 22);
  auto x = *Tensor::FromHost(xv, {9, 11}, Device::kCpu);
  ASSERT_TRUE(Activation({}, {ActivationKind::kSilu, &x, 1.0f, &x}).ok());
  ExpectNear(*x.ToHostF32(), [&](int64_t i) { return RefActivation(ActivationKind::kSilu, xv[i]); });
}

TEST(AddTest, MatchesAndAliases) {
  cpu::ThreadPool pool(3);
  for (const Shape& shape : Shapes()) {
    std::vector<float> av = RandomVector(NumElements(shape), 31), bv = RandomVector(NumElements(shape), 32);
    auto a = *Tensor::FromHost(av, shape, Device::kCpu);
    auto b = *Tensor::FromHost(bv, shape, Device::kCpu);
    auto out = *Tensor::Zeros(DType::kF32, shape, Device::kCpu);
    Context ctx;
    ctx.pool = &pool;
    ASSERT_TRUE(Add(ctx, {&a, &b, &out}).ok());
    ExpectNear(*out.ToHostF32(), [&](int64_t i) { return static_cast<double>(av[i]) + bv[i]; });
    ASSERT_TRUE(Add(ctx, {&a, &b, &a}).ok());  // out aliases a
    ExpectNear(*a.ToHostF32(), [&](int64_t i) { return static_cast<double>(av[i]) + bv[i]; });
    ASSERT_TRUE(Add(ctx, {&a, &b, &b}).ok());  // out aliases b: (a + b) + b
    ExpectNear(*b.ToHostF32(), [&](int64_t i) { return static_cast<double>(av[i]) + 2.0 * bv[i]; });
  }
}

TEST(SwiGluTest, MatchesAndAliases) {
  cpu::ThreadPool pool(2);
  for (auto [m, n] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {1, 13}, {7, 37}, {64, 1031}}) {
    std::vector<float> gv = RandomVector(m * n, 41), uv = RandomVector(m * n, 42);
    auto g = *Tensor::FromHost(gv, {m, n}, Device::kCpu);
    auto u = *Tensor::FromHost(uv, {m, n}, Device::kCpu);
    auto out = *Tensor::Zeros(DType::kF32, {m, n}, Device::kCpu);
    Context ctx;
    ctx.pool = &pool;
    auto want = [&](int64_t i) { return RefActivation(ActivationKind::kSilu, gv[i]) * uv[i]; };
    ASSERT_TRUE(SwiGlu(ctx, {&g, &u, &out}).ok());
    ExpectNear(*out.ToHostF32(), want);
    ASSERT_TRUE(SwiGlu(ctx, {&g, &u, &u}).ok());  // out aliases up
    ExpectNear(*u.ToHostF32(), want);
    auto u2 = *Tensor::FromHost(uv, {m, n}, Device::kCpu);
    ASSERT_TRUE(SwiGlu(ctx, {&g, &u2, &g}).ok());  // out aliases gate
    ExpectNear(*g.ToHostF32(), want);
  }
}

// act = GELU: out = GELU(gate) · up (Lattice's post-gate).
TEST(SwiGluTest, GeluGate) {
  std::vector<float> gv = RandomVector(7 * 37, 43), uv = RandomVector(7 * 37, 44);
  auto g = *Tensor::FromHost(gv, {7, 37}, Device::kCpu);
  auto u = *Tensor::FromHost(uv, {7, 37}, Device::kCpu);
  auto out = *Tensor::Zeros(DType::kF32, {7, 37}, Device::kCpu);
  ASSERT_TRUE(SwiGlu({}, {.gate = &g, .up = &u, .out = &out, .act = ActivationKind::kGelu}).ok());
  ExpectNear(*out.ToHostF32(), [&](int64_t i) { return RefActivation(ActivationKind::kGelu, gv[i]) * uv[i]; });
  EXPECT_FALSE(SwiGlu({}, {.gate = &g, .up = &u, .out = &out, .act = static_cast<ActivationKind>(99)}).ok());
}

TEST(ElementwiseTest, RejectsBadArguments) {
  auto a = *Tensor::Zeros(DType::kF32, {2, 4}, Device::kCpu);
  auto b = *Tensor::Zeros(DType::kF32, {2, 4}, Device::kCpu);
  auto other = *Tensor::Zeros(DType::kF32, {4, 2}, Device::kCpu);
  auto bf16 = *Tensor::Zeros(DType::kBF16, {2, 4}, Device::kCpu);
  auto rank1 = *Tensor::Zeros(DType::kF32, {8}, Device::kCpu);
  const Context ctx;
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(Activation(ctx, {ActivationKind::kSilu, &a, 1.0f, &other}).code(), kInvalid);
  EXPECT_EQ(Activation(ctx, {ActivationKind::kSilu, &bf16, 1.0f, &a}).code(), kInvalid);
  EXPECT_EQ(Activation(ctx, {ActivationKind::kSilu, &a, 1.0f, &bf16}).code(), kInvalid);
  EXPECT_EQ(Activation(ctx, {static_cast<ActivationKind>(99), &a, 1.0f, &b}).code(), kInvalid);
  EXPECT_EQ(Activation(ctx, {ActivationKind::kSilu, nullptr, 1.0f, &b}).code(), kInvalid);
  EXPECT_EQ(Add(ctx, {&a, &other, &b}).code(), kInvalid);
  EXPECT_EQ(Add(ctx, {&a, &b, &other}).code(), kInvalid);
  EXPECT_EQ(Add(ctx, {&a, &bf16, &b}).code(), kInvalid);
  EXPECT_EQ(Add(ctx, {&a, nullptr, &b}).code(), kInvalid);
  EXPECT_EQ(SwiGlu(ctx, {&a, &other, &b}).code(), kInvalid);
  EXPECT_EQ(SwiGlu(ctx, {&rank1, &rank1, &rank1}).code(), kInvalid);
  EXPECT_EQ(SwiGlu(ctx, {&a, &b, nullptr}).code(), kInvalid);
  EXPECT_TRUE(Add(ctx, {&a, &b, &b}).ok());
  Context cuda;
  cuda.device = Device::kCuda;
  EXPECT_FALSE(Activation(cuda, {ActivationKind::kSilu, &a, 1.0f, &b}).ok());  // no GPU here: never succeeds
  EXPECT_FALSE(Add(cuda, {&a, &b, &b}).ok());  // no GPU here: never succeeds
  EXPECT_FALSE(SwiGlu(cuda, {&a, &b, &b}).ok());  // no GPU here: never succeeds
}

}  // namespace
}  // namespace mcserve::kernels
