// GAM's new ops on the CPU against double-precision formulas: LayerNorm (affine, biased variance),
// Softmax (rows, shift-invariant, large logits) and GatedFusion (with and without the gate bias),
// in place where allowed, and validation errors.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/gated_fusion/gated_fusion.h"
#include "kernels/layer_norm/layer_norm.h"
#include "kernels/softmax/softmax.h"
#include "tests/unit/kernels/random_inputs.h"

namespace mcserve::kernels {
namespace {

const Context kCpu{.device = Device::kCpu};

Tensor Host(const std::vector<float>& v, const Shape& s) { return *Tensor::FromHost(v, s, Device::kCpu); }

TEST(LayerNormTest, MatchesDoubleFormula) {
  for (auto [rows, n] : {std::pair<int64_t, int64_t>{1, 1}, {3, 7}, {4, 32}, {2, 333}}) {
    const std::vector<float> x = RandomVector(rows * n, 1, -3.0f, 5.0f), w = RandomVector(n, 2), b = RandomVector(n, 3);
    Tensor xt = Host(x, {rows, n}), wt = Host(w, {n}), bt = Host(b, {n});
    ASSERT_TRUE(LayerNorm(kCpu, {.x = &xt, .weight = &wt, .bias = &bt, .eps = 1e-5f, .out = &xt}).ok());
    const std::vector<float> got = *xt.ToHostF32();
    for (int64_t r = 0; r < rows; ++r) {
      double mean = 0, var = 0;
      for (int64_t i = 0; i < n; ++i) mean += x[r * n + i] / static_cast<double>(n);
      for (int64_t i = 0; i < n; ++i) var += (x[r * n + i] - mean) * (x[r * n + i] - mean) / static_cast<double>(n);
      for (int64_t i = 0; i < n; ++i) {
        const double want = (x[r * n + i] - mean) / std::sqrt(var + 1e-5) * w[i] + b[i];
        ASSERT_NEAR(got[r * n + i], want, 2e-5 * (1 + std::fabs(want))) << rows << "x" << n << " at " << r << "," << i;
      }
    }
  }
}

TEST(LayerNormTest, RejectsMissingBiasAndBadShapes) {
  Tensor x = *Tensor::Zeros(DType::kF32, {2, 4}, Device::kCpu), w = *Tensor::Zeros(DType::kF32, {4}, Device::kCpu);
  Tensor w3 = *Tensor::Zeros(DType::kF32, {3}, Device::kCpu);
  EXPECT_EQ(LayerNorm(kCpu, {.x = &x, .weight = &w, .out = &x}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LayerNorm(kCpu, {.x = &x, .weight = &w, .bias = &w3, .out = &x}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LayerNorm(kCpu, {.x = &x, .weight = &w, .bias = &w, .eps = -1.0f, .out = &x}).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SoftmaxTest, MatchesDoubleFormulaAndIsShiftInvariant) {
  for (auto [rows, n] : {std::pair<int64_t, int64_t>{1, 1}, {3, 9}, {2, 512}}) {
    std::vector<float> x = RandomVector(rows * n, 4, -6.0f, 6.0f);
    Tensor xt = Host(x, {rows, n}), out = *Tensor::Zeros(DType::kF32, {rows, n}, Device::kCpu);
    ASSERT_TRUE(Softmax(kCpu, {.x = &xt, .out = &out}).ok());
    std::vector<float> shifted = x;
    for (float& v : shifted) v += 500.0f;  // exp would overflow without the max shift
    Tensor st = Host(shifted, {rows, n});
    ASSERT_TRUE(Softmax(kCpu, {.x = &st, .out = &st}).ok());
    const std::vector<float> got = *out.ToHostF32(), got_shifted = *st.ToHostF32();
    for (int64_t r = 0; r < rows; ++r) {
      double total = 0;
      for (int64_t i = 0; i < n; ++i) total += std::exp(static_cast<double>(x[r * n + i]));
      for (int64_t i = 0; i < n; ++i) {
        const double want = std::exp(static_cast<double>(x[r * n + i])) / total;
        ASSERT_NEAR(got[r * n + i], want, 1e-6 + 1e-5 * want);
        ASSERT_NEAR(got_shifted[r * n + i], want, 1e-6 + 1e-3 * want);
      }
    }
  }
}

TEST(GatedFusionTest, MatchesFormulaWithAndWithoutBias) {
  const int64_t t = 5, d = 6;
  const std::vector<float> g = RandomVector(t * 2 * d, 5, -4, 4), b = RandomVector(2 * d, 6), l = RandomVector(t * d, 7),
                           gl = RandomVector(t * d, 8);
  Tensor gt = Host(g, {t, 2 * d}), bt = Host(b, {2 * d}), lt = Host(l, {t, d}), glt = Host(gl, {t, d});
  for (bool bias : {false, true}) {
    Tensor out = *Tensor::Zeros(DType::kF32, {t, d}, Device::kCpu);
    ASSERT_TRUE(GatedFusion(kCpu, {.gate = &gt, .gate_bias = bias ? &bt : nullptr, .local = &lt, .global = &glt,
                                   .out = &out})
                    .ok());
    const std::vector<float> got = *out.ToHostF32();
    auto sig = [](double v) { return 1 / (1 + std::exp(-v)); };
    for (int64_t r = 0; r < t; ++r) {
      for (int64_t c = 0; c < d; ++c) {
        const double bl = bias ? b[c] : 0, bg = bias ? b[d + c] : 0;
        const double want = sig(g[r * 2 * d + c] + bl) * l[r * d + c] + sig(g[r * 2 * d + d + c] + bg) * gl[r * d + c];
        ASSERT_NEAR(got[r * d + c], want, 1e-6);
      }
    }
  }
  Tensor bad = *Tensor::Zeros(DType::kF32, {t, d}, Device::kCpu);
  EXPECT_EQ(GatedFusion(kCpu, {.gate = &bad, .local = &lt, .global = &glt, .out = &bad}).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mcserve::kernels
