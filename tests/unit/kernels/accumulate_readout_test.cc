// AccumulateReadOut (the CPU read-out's y += Sᵀ(g·q) for one page) against the per-element loop it
// promises, bit for bit: y[j] = fma(g·q[k], S[k, j], y[j]) for k ascending, for V with and without
// 64-column blocks, 8-column blocks and a tail, K from 0 up, and a nonzero starting y; and against a
// double-precision sum.
#include "kernels/mc_readout/accumulate_readout.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace mcserve::kernels::internal {
namespace {

TEST(AccumulateReadOutTest, EveryColumnIsTheFusedLoopInRowOrder) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int v : {1, 7, 8, 9, 64, 65, 72, 130, 192}) {
    for (int k : {0, 1, 5, 64}) {
      std::vector<float> S(static_cast<size_t>(k) * v), q(k), y(v);
      for (float& x : S) x = normal(rng);
      for (float& x : q) x = normal(rng);
      for (float& x : y) x = normal(rng);
      const float g = 0.37f;
      std::vector<float> want = y;
      std::vector<double> exact(y.begin(), y.end());
      for (int j = 0; j < v; ++j) {
        for (int r = 0; r < k; ++r) {
          want[j] = std::fma(g * q[r], S[static_cast<size_t>(r) * v + j], want[j]);
          exact[j] += static_cast<double>(g) * q[r] * S[static_cast<size_t>(r) * v + j];
        }
      }
      AccumulateReadOut(S.data(), q.data(), g, k, v, y.data());
      for (int j = 0; j < v; ++j) {
        ASSERT_EQ(y[j], want[j]) << "V " << v << ", K " << k << ", column " << j;
        ASSERT_NEAR(y[j], exact[j], 1e-4 * (1.0 + std::fabs(exact[j]))) << "V " << v << ", K " << k;
      }
    }
  }
}

}  // namespace
}  // namespace mcserve::kernels::internal
