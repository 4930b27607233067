// L2Norm (L2 and sum kinds) against a double loop: odd sizes, scale, aliasing, threads, validation.
#include "kernels/l2_norm/l2_norm.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "random_inputs.h"
#include "kernels/cpu/thread_pool.h"

namespace mcserve::kernels {
namespace {

void ExpectNorm(RowNormKind kind, const std::vector<float>& x, float eps, float scale, const std::vector<float>& got,
                int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double v = x[r * n + i];
      s += kind == RowNormKind::kL2 ? v * v : v;
    }
    const double f = kind == RowNormKind::kL2 ? scale / std::sqrt(s + eps) : scale / (s + eps);
    for (int64_t i = 0; i < n; ++i) {
      const double want = x[r * n + i] * f;
      ASSERT_NEAR(got[r * n + i], want, 1e-5 * std::fabs(want) + 1e-7) << "row " << r << " col " << i;
    }
  }
}

TEST(L2NormTest, BothKindsMatchDoubleLoop) {
  cpu::ThreadPool pool(2);
  for (cpu::ThreadPool* p : {static_cast<cpu::ThreadPool*>(nullptr), &pool}) {
    for (auto [rows, n] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {1, 7}, {7, 37}, {64, 128}, {513, 131}}) {
      for (RowNormKind kind : {RowNormKind::kL2, RowNormKind::kSum}) {
        for (float scale : {1.0f, 0.125f}) {
          SCOPED_TRACE(testing::Message() << "rows=" << rows << " n=" << n << " kind=" << static_cast<int>(kind));
          // Sum norm divides by Σx: keep rows positive (as after a positive feature map).
          std::vector<float> xv = kind == RowNormKind::kL2 ? RandomVector(rows * n, 7, -3.0f, 3.0f)
                                                           : RandomVector(rows * n, 8, 0.01f, 2.0f);
          const float eps = kind == RowNormKind::kL2 ? 1e-6f : 1e-4f;
          auto x = *Tensor::FromHost(xv, {rows, n}, Device::kCpu);
          auto out = *Tensor::Zeros(DType::kF32, {rows, n}, Device::kCpu);
          Context ctx;
          ctx.pool = p;
          ASSERT_TRUE(L2Norm(ctx, {kind, &x, eps, scale, &out}).ok());
          ExpectNorm(kind, xv, eps, scale, *out.ToHostF32(), rows, n);
          ASSERT_TRUE(L2Norm(ctx, {kind, &x, eps, scale, &x}).ok());  // in place
          ExpectNorm(kind, xv, eps, scale, *x.ToHostF32(), rows, n);
        }
      }
    }
  }
}

TEST(L2NormTest, ZeroRowStaysFinite) {
  auto x = *Tensor::Zeros(DType::kF32, {2, 5}, Device::kCpu);
  ASSERT_TRUE(L2Norm({}, {RowNormKind::kL2, &x, 1e-6f, 1.0f, &x}).ok());
  EXPECT_EQ(*x.ToHostF32(), std::vector<float>(10, 0.0f));
}

TEST(L2NormTest, RejectsBadArguments) {
  auto x = *Tensor::Zeros(DType::kF32, {2, 4}, Device::kCpu);
  auto out = *Tensor::Zeros(DType::kF32, {2, 4}, Device::kCpu);
  auto out_bad = *Tensor::Zeros(DType::kF32, {2, 5}, Device::kCpu);
  auto x_bf16 = *Tensor::Zeros(DType::kBF16, {2, 4}, Device::kCpu);
  auto x_3d = *Tensor::Zeros(DType::kF32, {1, 2, 4}, Device::kCpu);
  const Context ctx;
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_TRUE(L2Norm(ctx, {RowNormKind::kL2, &x, 1e-6f, 1.0f, &out}).ok());
  EXPECT_EQ(L2Norm(ctx, {RowNormKind::kL2, &x, 1e-6f, 1.0f, &out_bad}).code(), kInvalid);
  EXPECT_EQ(L2Norm(ctx, {RowNormKind::kL2, &x_bf16, 1e-6f, 1.0f, &out}).code(), kInvalid);
  EXPECT_EQ(L2Norm(ctx, {RowNormKind::kL2, &x_3d, 1e-6f, 1.0f, &x_3d}).code(), kInvalid);
  EXPECT_EQ(L2Norm(ctx, {RowNormKind::kL2, nullptr, 1e-6f, 1.0f, &out}).code(), kInvalid);
  EXPECT_EQ(L2Norm(ctx, {RowNormKind::kL2, &x, -1.0f, 1.0f, &out}).code(), kInvalid);
  EXPECT_EQ(L2Norm(ctx, {RowNormKind::kL2, &x, 1e-6f, INFINITY, &out}).code(), kInvalid);
  EXPECT_EQ(L2Norm(ctx, {static_cast<RowNormKind>(7), &x, 1e-6f, 1.0f, &out}).code(), kInvalid);
  Context cuda;
  cuda.device = Device::kCuda;
  EXPECT_FALSE(L2Norm(cuda, {RowNormKind::kL2, &x, 1e-6f, 1.0f, &out}).ok());  // no GPU here: never succeeds
}

}  // namespace
}  // namespace mcserve::kernels
