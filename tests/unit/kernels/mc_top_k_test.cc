// SSC's top-k and gate weights (mc_readout_math: MarkTopK, GateWeights), shared by the CPU read-outs,
// the router and the CUDA kernels: the one-pass selection (TopKPositions, top_k ≤ kMaxOnePassTopK)
// keeps exactly the entries of the pass-per-pick selection it replaced (reproduced here), and the
// weights are those of SoftmaxWithOnline over that selection bit for bit. Lists of 1–300 entries,
// top_k 1–10 (past kMaxOnePassTopK too), scores drawn with many ties, signed zeros, infinities, and
// NaN (which falls back to the passes).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/mc_readout/mc_readout_math.h"

namespace mcserve::kernels::mc_readout_math {
namespace {

// The selection before the one pass: pass r picks the best entry ranking after pass r−1's pick.
std::vector<unsigned char> PassPerPick(const std::vector<float>& scores, int top_k) {
  const int n = static_cast<int>(scores.size());
  std::vector<unsigned char> keep(n, n <= top_k ? 1 : 0);
  if (n <= top_k) return keep;
  int prev = -1;
  float prev_z = 0.0f;
  for (int r = 0; r < top_k; ++r) {
    int best = -1;
    for (int i = 0; i < n; ++i) {
      if (prev >= 0 && !RanksBefore(prev_z, prev, scores[i], i)) continue;
      if (best < 0 || RanksBefore(scores[i], i, scores[best], best)) best = i;
    }
    if (best < 0) break;
    keep[best] = 1;
    prev = best;
    prev_z = scores[best];
  }
  return keep;
}

enum class Draw { kNormal, kFewValues, kSignedZeros, kInfinities, kNaN };

std::vector<float> Scores(std::mt19937& rng, int n, Draw draw) {
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::uniform_int_distribution<int> small(-2, 2);
  std::vector<float> z(n);
  for (int i = 0; i < n; ++i) {
    switch (draw) {
      case Draw::kNormal: z[i] = normal(rng); break;
      case Draw::kFewValues: z[i] = 0.5f * small(rng); break;  // ties everywhere
      case Draw::kSignedZeros: z[i] = small(rng) == 0 ? -0.0f : (small(rng) > 0 ? 0.0f : normal(rng)); break;
      case Draw::kInfinities:
        z[i] = small(rng) == 2 ? std::numeric_limits<float>::infinity()
                               : (small(rng) == -2 ? -std::numeric_limits<float>::infinity() : normal(rng));
        break;
      case Draw::kNaN: z[i] = small(rng) == 2 ? std::nanf("") : normal(rng); break;
    }
  }
  return z;
}

TEST(McTopKTest, OnePassKeepsWhatThePassPerPickKept) {
  std::mt19937 rng(11);
  for (Draw draw : {Draw::kNormal, Draw::kFewValues, Draw::kSignedZeros, Draw::kInfinities, Draw::kNaN}) {
    for (int n : {1, 2, 3, 8, 9, 17, 64, 256, 300}) {
      for (int top_k = 1; top_k <= 10; ++top_k) {
        const std::vector<float> z = Scores(rng, n, draw);
        std::vector<unsigned char> keep(n, 7);
        MarkTopK(z.data(), n, top_k, keep.data());
        EXPECT_EQ(keep, PassPerPick(z, top_k)) << "draw " << static_cast<int>(draw) << ", n " << n << ", top_k " << top_k;
      }
    }
  }
}

TEST(McTopKTest, GateWeightsEqualTheSoftmaxOverThePassPerPickSelectionBitForBit) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  int one_pass_cases = 0;
  for (Draw draw : {Draw::kNormal, Draw::kFewValues, Draw::kSignedZeros, Draw::kInfinities, Draw::kNaN}) {
    for (int n : {1, 2, 3, 8, 9, 17, 64, 256, 300}) {
      for (int top_k = 1; top_k <= 10; ++top_k) {
        const std::vector<float> z = Scores(rng, n, draw);
        const float z_on = normal(rng);
        std::vector<float> got = z, want = z;
        std::vector<unsigned char> scratch(n);
        const float got_on = GateWeights(got.data(), n, z_on, top_k, scratch.data());
        const std::vector<unsigned char> keep = PassPerPick(z, top_k);
        const float want_on = SoftmaxWithOnline(want.data(), n <= top_k ? nullptr : keep.data(), n, z_on);
        const std::string where = "draw " + std::to_string(static_cast<int>(draw)) + ", n " + std::to_string(n) +
                                  ", top_k " + std::to_string(top_k);
        EXPECT_EQ(std::memcmp(&got_on, &want_on, sizeof(float)), 0) << where << ": " << got_on << " vs " << want_on;
        ASSERT_EQ(std::memcmp(got.data(), want.data(), n * sizeof(float)), 0) << where;
        one_pass_cases += n > top_k && top_k <= kMaxOnePassTopK && draw != Draw::kNaN;
      }
    }
  }
  EXPECT_EQ(one_pass_cases, 200);  // 50 (n, top_k) pairs a draw took the one pass, not the fallbacks
}

}  // namespace
}  // namespace mcserve::kernels::mc_readout_math
