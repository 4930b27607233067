// CMS backward ops (kernels/cms_backward) on the CPU against double-precision host math: RMSNorm
// backward and the SwiGLU / GELU backward against central finite differences of ⟨dy, f(x)⟩, the
// cross-entropy gradient against softmax − onehot, Transpose on known values, and validation.
// Tolerance: float32 kernels vs double references, 2e-4 relative (+2e-5): the finite differences
// (step 1e-3 in double) are accurate to ~1e-6, the rest is float rounding of sums over ≤ 96 terms.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "kernels/cms_backward/cms_backward.h"
#include "tests/unit/kernels/random_inputs.h"

namespace mcserve::kernels {
namespace {

const Context kCpu{.device = Device::kCpu};

Tensor T(const std::vector<float>& v, Shape s) { return *Tensor::FromHost(v, s, Device::kCpu); }

// ∂/∂x_i of f(x) by central differences in double (f: the scalar ⟨dy, forward(x)⟩).
std::vector<double> NumericGrad(std::vector<double> x, const std::function<double(const std::vector<double>&)>& f) {
  std::vector<double> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double keep = x[i], h = 1e-3;
    x[i] = keep + h;
    const double up = f(x);
    x[i] = keep - h;
    g[i] = (up - f(x)) / (2 * h);
    x[i] = keep;
  }
  return g;
}

void ExpectClose(const std::vector<float>& got, const std::vector<double>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 2e-4 * std::fabs(want[i]) + 2e-5) << what << " at " << i;
  }
}

TEST(CmsBackwardTest, RmsNormBackwardMatchesFiniteDifferences) {
  for (int64_t n : {1, 5, 16, 96}) {
    const int64_t rows = 3;
    const std::vector<float> x = RandomVector(rows * n, 1 + n, -2, 2), w = RandomVector(n, 2 + n, 0.5f, 1.5f),
                             dy = RandomVector(rows * n, 3 + n);
    const float eps = 1e-5f;
    Tensor xt = T(x, {rows, n}), wt = T(w, {n}), dyt = T(dy, {rows, n}), dx = *Tensor::Zeros(DType::kF32, {rows, n}, Device::kCpu);
    ASSERT_TRUE(RmsNormBackward(kCpu, {.x = &xt, .weight = &wt, .dy = &dyt, .eps = eps, .dx = &dx}).ok());
    std::vector<double> want;
    for (int64_t r = 0; r < rows; ++r) {
      const auto f = [&](const std::vector<double>& v) {
        double ss = 0, out = 0;
        for (double a : v) ss += a * a;
        const double inv = 1 / std::sqrt(ss / n + eps);
        for (int64_t i = 0; i < n; ++i) out += dy[r * n + i] * v[i] * inv * w[i];
        return out;
      };
      const std::vector<double> g = NumericGrad({x.begin() + r * n, x.begin() + (r + 1) * n}, f);
      want.insert(want.end(), g.begin(), g.end());
    }
    ExpectClose(*dx.ToHostF32(), want, "RmsNormBackward");
  }
}

TEST(CmsBackwardTest, XentGradIsSoftmaxMinusOnehot) {
  const int64_t rows = 4, v = 37;
  const std::vector<float> logits = RandomVector(rows * v, 7, -6, 6);
  const std::vector<int32_t> targets = {0, 36, 5, 5};
  Tensor lt = T(logits, {rows, v}), tt = *Tensor::FromHostI32(targets, {rows}, Device::kCpu);
  Tensor g = *Tensor::Zeros(DType::kF32, {rows, v}, Device::kCpu);
  ASSERT_TRUE(XentGrad(kCpu, {.logits = &lt, .targets = &tt, .grad = &g}).ok());
  std::vector<double> want;
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (int64_t i = 0; i < v; ++i) sum += std::exp(static_cast<double>(logits[r * v + i]));
    for (int64_t i = 0; i < v; ++i) want.push_back(std::exp(static_cast<double>(logits[r * v + i])) / sum - (i == targets[r]));
  }
  ExpectClose(*g.ToHostF32(), want, "XentGrad");
  ASSERT_TRUE(XentGrad(kCpu, {.logits = &lt, .targets = &tt, .grad = &lt}).ok());  // in place
  ExpectClose(*lt.ToHostF32(), want, "XentGrad in place");
}

TEST(CmsBackwardTest, GluBackwardMatchesFiniteDifferences) {
  const int64_t rows = 2, n = 9;
  const std::vector<float> gate = RandomVector(rows * n, 11, -4, 4), up = RandomVector(rows * n, 12, -4, 4),
                           dm = RandomVector(rows * n, 13);
  Tensor gt = T(gate, {rows, n}), ut = T(up, {rows, n}), dmt = T(dm, {rows, n});
  Tensor dg = *Tensor::Zeros(DType::kF32, {rows, n}, Device::kCpu), du = *Tensor::Zeros(DType::kF32, {rows, n}, Device::kCpu);
  const auto silu = [](double z) { return z / (1 + std::exp(-z)); };
  const auto gelu = [](double z) { return 0.5 * z * (1 + std::erf(z / std::sqrt(2.0))); };
  const std::vector<double> g0(gate.begin(), gate.end()), u0(up.begin(), up.end());
  ASSERT_TRUE(GluBackward(kCpu, {.gate = &gt, .up = &ut, .dm = &dmt, .dgate = &dg, .dup = &du}).ok());
  ExpectClose(*dg.ToHostF32(), NumericGrad(g0, [&](const std::vector<double>& g) {
                double s = 0;
                for (size_t i = 0; i < g.size(); ++i) s += dm[i] * silu(g[i]) * u0[i];
                return s;
              }), "SwiGLU dgate");
  ExpectClose(*du.ToHostF32(), NumericGrad(u0, [&](const std::vector<double>& u) {
                double s = 0;
                for (size_t i = 0; i < u.size(); ++i) s += dm[i] * silu(g0[i]) * u[i];
                return s;
              }), "SwiGLU dup");
  ASSERT_TRUE(GluBackward(kCpu, {.up = &ut, .dm = &dmt, .dup = &du}).ok());
  ExpectClose(*du.ToHostF32(), NumericGrad(u0, [&](const std::vector<double>& u) {
                double s = 0;
                for (size_t i = 0; i < u.size(); ++i) s += dm[i] * gelu(u[i]);
                return s;
              }), "GELU dup");
}

TEST(CmsBackwardTest, TransposeKnownValues) {
  Tensor x = T({1, 2, 3, 4, 5, 6}, {2, 3}), out = *Tensor::Zeros(DType::kF32, {3, 2}, Device::kCpu);
  ASSERT_TRUE(Transpose(kCpu, {.x = &x, .out = &out}).ok());
  EXPECT_EQ(*out.ToHostF32(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
}

TEST(CmsBackwardTest, RejectsBadShapes) {
  Tensor x = *Tensor::Zeros(DType::kF32, {2, 4}, Device::kCpu), w3 = *Tensor::Zeros(DType::kF32, {3}, Device::kCpu);
  Tensor wrong = *Tensor::Zeros(DType::kF32, {2, 5}, Device::kCpu), w4 = *Tensor::Zeros(DType::kF32, {4}, Device::kCpu);
  EXPECT_EQ(RmsNormBackward(kCpu, {.x = &x, .weight = &w3, .dy = &x, .dx = &x}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RmsNormBackward(kCpu, {.x = &x, .weight = &w4, .dy = &wrong, .dx = &x}).code(), absl::StatusCode::kInvalidArgument);
  Tensor targets = *Tensor::Zeros(DType::kF32, {2}, Device::kCpu);
  EXPECT_EQ(XentGrad(kCpu, {.logits = &x, .targets = &targets, .grad = &x}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GluBackward(kCpu, {.gate = &x, .up = &x, .dm = &x, .dup = &x}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Transpose(kCpu, {.x = &x, .out = &x}).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mcserve::kernels
