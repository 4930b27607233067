// ScorePages (four pages at a time) and ScorePageHeads (four heads of a page at a time), the CPU
// router's and read-outs' page scores, against mc_readout_math::Dot, the order the CUDA kernels and the
// reference use: bit for bit, for lists of 0–13 pages (every remainder of the groups of four), 1–5
// heads (every remainder of the groups of four) and a head offset, K with and without a tail past Dot's 8 lanes, pages listed out of
// order and twice.
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/mc_readout/mc_readout_math.h"
#include "kernels/mc_readout/score_pages.h"

namespace mcserve::kernels::internal {
namespace {

TEST(ScorePagesTest, BitIdenticalToDotPerPage) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  constexpr int kHeads = 5, kNumPages = 16;  // 5: a group of four heads and one more
  for (int k : {1, 7, 8, 19, 64}) {
    std::vector<std::vector<float>> keys(kNumPages, std::vector<float>(kHeads * k));  // each [Hs, K]
    std::vector<const float*> pooled;
    for (auto& key : keys) {
      for (float& x : key) x = normal(rng);
      pooled.push_back(key.data());
    }
    std::vector<float> u(k);
    for (float& x : u) x = normal(rng);
    for (int n = 0; n <= 13; ++n) {
      std::vector<int32_t> list(n);
      for (int i = 0; i < n; ++i) list[i] = (i * 7 + 3) % 11;  // out of order, repeating past 11 entries
      for (int h = 0; h < kHeads; ++h) {
        std::vector<float> scores(n, -1.0f);
        ScorePages(u.data(), pooled.data(), list.data(), n, int64_t{h} * k, k, scores.data());
        for (int i = 0; i < n; ++i) {
          EXPECT_EQ(scores[i], mc_readout_math::Dot(u.data(), pooled[list[i]] + h * k, k))
              << "K " << k << ", n " << n << ", head " << h << ", entry " << i;
        }
      }
      // Every head of a page at once: u_heads [kHeads, K] (a head per row), scores [kHeads, n + 2].
      for (int heads = 1; heads <= kHeads; ++heads) {
        std::vector<float> u_heads(heads * k);
        for (float& x : u_heads) x = normal(rng);
        const int64_t stride = n + 2;
        std::vector<float> scores(heads * stride, -1.0f);
        ScorePageHeads(u_heads.data(), pooled.data(), list.data(), n, heads, k, scores.data(), stride);
        for (int h = 0; h < heads; ++h) {
          for (int i = 0; i < n; ++i) {
            EXPECT_EQ(scores[h * stride + i], mc_readout_math::Dot(u_heads.data() + h * k, pooled[list[i]] + h * k, k))
                << "K " << k << ", n " << n << ", " << heads << " heads, head " << h << ", entry " << i;
          }
          EXPECT_EQ(scores[h * stride + n], -1.0f);  // nothing past the list
        }
      }
    }
  }
}

}  // namespace
}  // namespace mcserve::kernels::internal
