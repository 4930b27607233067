#include "engine/sampling/sampler.h"

#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace mcserve::engine {
namespace {

Sampler Make(const SamplingParams& p, int vocab) {
  auto s = Sampler::Create(p, vocab);
  EXPECT_TRUE(s.ok()) << s.status();
  return std::move(*s);
}

SamplingParams Greedy() {
  SamplingParams p;
  p.temperature = 0.0f;
  return p;
}

// Logits whose softmax is exactly `probs` (up to float rounding).
std::vector<float> LogitsOf(const std::vector<double>& probs) {
  std::vector<float> logits;
  for (double p : probs) logits.push_back(static_cast<float>(std::log(p)));
  return logits;
}

// Draws n tokens from the same logits (no penalties, so the distribution is fixed) and returns
// the count per id.
std::vector<int> Histogram(Sampler& s, const std::vector<float>& logits, int n) {
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < n; ++i) ++counts.at(s.Sample(logits).id);
  return counts;
}

// Every empirical frequency is within 3σ of `expected` (ids with expected 0 must never appear),
// and Pearson's χ² is below the 0.1% critical value for up to 9 degrees of freedom.
void ExpectDistribution(const std::vector<int>& counts, const std::vector<double>& expected) {
  ASSERT_EQ(counts.size(), expected.size());
  int n = 0;
  for (int c : counts) n += c;
  double chi2 = 0.0;
  int dof = -1;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (expected[i] == 0.0) {
      EXPECT_EQ(counts[i], 0) << "id " << i << " is outside the kept set";
      continue;
    }
    const double mean = n * expected[i];
    const double sigma = std::sqrt(n * expected[i] * (1.0 - expected[i]));
    EXPECT_NEAR(counts[i], mean, 3.0 * sigma + 1e-9) << "id " << i;
    chi2 += (counts[i] - mean) * (counts[i] - mean) / mean;
    ++dof;
  }
  static const double kCritical001[] = {0, 10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32, 26.12, 27.88};
  ASSERT_GE(dof, 0);
  ASSERT_LT(dof, 10);
  if (dof > 0) EXPECT_LT(chi2, kCritical001[dof]);
}

std::vector<double> Normalized(std::vector<double> w) {
  double total = 0.0;
  for (double x : w) total += x;
  for (double& x : w) x /= total;
  return w;
}

TEST(SamplerTest, GreedyTiesGoToLowestIdAndHonourBans) {
  Sampler s = Make(Greedy(), 5);
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, 2.0f, -1.0f};
  EXPECT_EQ(s.Sample(logits).id, 1);
  const int32_t banned[] = {1};
  EXPECT_EQ(s.Sample(logits, banned).id, 2);
  const int32_t banned2[] = {1, 2, 3};
  EXPECT_EQ(s.Sample(logits, banned2).id, 0);
}

TEST(SamplerTest, LogitBiasIsAddedFirst) {
  SamplingParams p = Greedy();
  p.logit_bias = {{0, 2.5f}, {2, -10.0f}};
  Sampler s = Make(p, 3);
  EXPECT_EQ(s.Sample(std::vector<float>{1.0f, 3.0f, 4.0f}).id, 0);  // 3.5 vs 3 vs −6
  p.logit_bias = {{0, 1.5f}};
  Sampler t = Make(p, 3);
  EXPECT_EQ(t.Sample(std::vector<float>{1.0f, 3.0f, 2.0f}).id, 1);  // 2.5 < 3
}

TEST(SamplerTest, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogits) {
  const auto pick = [](float rho, std::vector<float> logits) {
    SamplingParams p = Greedy();
    p.repetition_penalty = rho;
    Sampler s = Make(p, 2);
    s.SetPrompt(std::vector<int32_t>{0});
    return s.Sample(logits).id;
  };
  EXPECT_EQ(pick(1.4f, {3.0f, 2.0f}), 0);   // 3/1.4 = 2.14 > 2
  EXPECT_EQ(pick(1.6f, {3.0f, 2.0f}), 1);   // 3/1.6 = 1.875 < 2
  EXPECT_EQ(pick(1.4f, {-2.0f, -2.9f}), 0);  // −2·1.4 = −2.8 > −2.9
  EXPECT_EQ(pick(1.5f, {-2.0f, -2.9f}), 1);  // −3.0 < −2.9
  EXPECT_EQ(pick(0.5f, {1.0f, 1.5f}), 0);   // ρ < 1 rewards: 1/0.5 = 2 > 1.5
}

TEST(SamplerTest, RepetitionPenaltyCountsOutputOnceEvenIfAlsoInPrompt) {
  SamplingParams p = Greedy();
  p.repetition_penalty = 1.5f;
  Sampler s = Make(p, 2);
  EXPECT_EQ(s.Sample(std::vector<float>{3.0f, 2.5f}).id, 0);  // nothing seen yet
  EXPECT_EQ(s.Sample(std::vector<float>{3.0f, 2.5f}).id, 1);  // 3/1.5 = 2 < 2.5
  EXPECT_EQ(s.Sample(std::vector<float>{3.0f, 2.5f}).id, 0);  // 2 > 2.5/1.5

  Sampler t = Make(p, 2);
  t.SetPrompt(std::vector<int32_t>{0, 0, 0});
  EXPECT_EQ(t.Sample(std::vector<float>{3.0f, 1.6f}).id, 0);  // 3/1.5 = 2 > 1.6
  EXPECT_EQ(t.Sample(std::vector<float>{3.0f, 1.6f}).id, 0);  // still 2: applied once, not per source
}

TEST(SamplerTest, FrequencyPenaltyCountsOutputOccurrencesNotPrompt) {
  SamplingParams p = Greedy();
  p.frequency_penalty = 0.4f;
  Sampler s = Make(p, 3);
  s.SetPrompt(std::vector<int32_t>{0, 0, 0, 0});  // the prompt does not count
  const std::vector<float> logits = {2.0f, 1.0f, 0.0f};
  std::vector<int32_t> got;
  for (int i = 0; i < 5; ++i) got.push_back(s.Sample(logits).id);
  // 0 (2.0), 0 (1.6), 0 (1.2), then 0.8 < 1 → 1, then 0.8 vs 0.6 → 0.
  EXPECT_EQ(got, (std::vector<int32_t>{0, 0, 0, 1, 0}));
}

TEST(SamplerTest, PresencePenaltyIsSubtractedOnce) {
  SamplingParams p = Greedy();
  p.presence_penalty = 0.6f;
  Sampler s = Make(p, 3);
  const std::vector<float> logits = {2.0f, 1.0f, 0.0f};
  std::vector<int32_t> got;
  for (int i = 0; i < 4; ++i) got.push_back(s.Sample(logits).id);
  EXPECT_EQ(got, (std::vector<int32_t>{0, 0, 0, 0}));  // 1.4 > 1 however often it repeats
  p.presence_penalty = 1.1f;
  Sampler t = Make(p, 3);
  got.clear();
  for (int i = 0; i < 4; ++i) got.push_back(t.Sample(logits).id);
  EXPECT_EQ(got, (std::vector<int32_t>{0, 1, 0, 0}));  // 0.9 < 1; then 0.9 > −0.1
  p.presence_penalty = -2.0f;  // negative: encourages repeats
  Sampler u = Make(p, 3);
  EXPECT_EQ(u.Sample(std::vector<float>{1.0f, 2.0f, 0.0f}).id, 1);
  EXPECT_EQ(u.Sample(std::vector<float>{3.5f, 2.0f, 0.0f}).id, 1);  // 4 > 3.5
}

TEST(SamplerTest, TemperatureScalesTheSoftmax) {
  SamplingParams p;
  p.temperature = 0.5f;
  p.seed = 7;
  Sampler s = Make(p, 4);
  const std::vector<float> logits = {0.0f, 0.5f, 1.0f, 1.2f};
  std::vector<double> w;
  for (float x : logits) w.push_back(std::exp(x / 0.5));
  ExpectDistribution(Histogram(s, logits, 40000), Normalized(w));
}

TEST(SamplerTest, UnscaledDrawsFollowTheSoftmax) {
  SamplingParams p;
  p.seed = 11;
  Sampler s = Make(p, 5);
  const std::vector<double> probs = {0.05, 0.1, 0.2, 0.25, 0.4};
  ExpectDistribution(Histogram(s, LogitsOf(probs), 40000), probs);
}

TEST(SamplerTest, TopKKeepsTheKMostLikelyAndTiesAtTheBoundary) {
  SamplingParams p;
  p.top_k = 2;
  p.seed = 3;
  Sampler s = Make(p, 5);
  const std::vector<double> probs = {0.1, 0.3, 0.05, 0.15, 0.4};
  ExpectDistribution(Histogram(s, LogitsOf(probs), 30000), Normalized({0, 0.3, 0, 0, 0.4}));
  // Ties with the k-th logit are kept, as vLLM's threshold mask does.
  p.top_k = 1;
  Sampler t = Make(p, 4);
  const std::vector<int> counts = Histogram(t, std::vector<float>{1.0f, 3.0f, 3.0f, 0.0f}, 4000);
  EXPECT_EQ(counts[0] + counts[3], 0);
  EXPECT_GT(counts[1], 1500);
  EXPECT_GT(counts[2], 1500);
  for (int all : {0, -1}) {  // 0 and −1 both mean "all tokens"
    p.top_k = all;
    Sampler u = Make(p, 5);
    ExpectDistribution(Histogram(u, LogitsOf(probs), 30000), probs);
  }
}

TEST(SamplerTest, TopPKeepsTheSmallestPrefixReachingTheMass) {
  SamplingParams p;
  p.top_p = 0.5f;
  p.seed = 5;
  Sampler s = Make(p, 4);
  const std::vector<double> probs = {0.2, 0.4, 0.1, 0.3};
  // Sorted: 0.4 (mass before 0), 0.3 (0.4 < 0.5), then 0.2 has 0.7 before it → dropped.
  ExpectDistribution(Histogram(s, LogitsOf(probs), 30000), Normalized({0, 0.4, 0, 0.3}));
  p.top_p = 0.35f;
  Sampler t = Make(p, 4);
  ExpectDistribution(Histogram(t, LogitsOf(probs), 2000), {0, 1, 0, 0});
}

TEST(SamplerTest, TopPOnALargeFlatVocabularyKeepsTheLowestIds) {
  SamplingParams p;
  p.top_p = 0.9f;
  p.seed = 9;
  const int vocab = 5000;
  Sampler s = Make(p, vocab);
  const std::vector<float> logits(vocab, 0.25f);  // all tied: order by id, the nucleus is ids < 4500
  int max_id = 0;
  for (int i = 0; i < 5000; ++i) {
    const int32_t id = s.Sample(logits).id;
    ASSERT_LT(id, 4500);
    max_id = std::max(max_id, id);
  }
  EXPECT_GT(max_id, 4000);
}

TEST(SamplerTest, MinPDropsTokensBelowAFractionOfTheTop) {
  SamplingParams p;
  p.min_p = 0.2f;  // threshold 0.2 · 0.5 = 0.1
  p.seed = 13;
  Sampler s = Make(p, 4);
  const std::vector<double> probs = {0.5, 0.05, 0.3, 0.15};
  ExpectDistribution(Histogram(s, LogitsOf(probs), 30000), Normalized({0.5, 0, 0.3, 0.15}));
  p.min_p = 0.5f;  // threshold 0.25
  Sampler t = Make(p, 4);
  ExpectDistribution(Histogram(t, LogitsOf(probs), 30000), Normalized({0.5, 0, 0.3, 0}));
  // min_p applies to the temperature-scaled distribution: at T = 2, p ∝ sqrt(p) and 0.15 survives.
  p.temperature = 2.0f;
  Sampler u = Make(p, 4);
  std::vector<double> w = {std::sqrt(0.5), 0, std::sqrt(0.3), std::sqrt(0.15)};
  ExpectDistribution(Histogram(u, LogitsOf(probs), 30000), Normalized(w));
}

TEST(SamplerTest, BannedIdsAreNeverDrawn) {
  SamplingParams p;
  p.seed = 17;
  Sampler s = Make(p, 4);
  const std::vector<double> probs = {0.7, 0.1, 0.1, 0.1};
  const int32_t banned[] = {0, 2};
  std::vector<int> counts(4, 0);
  for (int i = 0; i < 20000; ++i) ++counts[s.Sample(LogitsOf(probs), banned).id];
  ExpectDistribution(counts, {0, 0.5, 0, 0.5});
}

TEST(SamplerTest, SeedMakesDrawsReproducible) {
  const auto draws = [](uint64_t seed) {
    SamplingParams p;
    p.seed = seed;
    p.top_k = 50;
    Sampler s = Make(p, 200);
    std::vector<float> logits(200);
    for (int i = 0; i < 200; ++i) logits[i] = static_cast<float>(std::sin(i * 0.37) * 2.0);
    std::vector<int32_t> out;
    for (int i = 0; i < 200; ++i) out.push_back(s.Sample(logits).id);
    return out;
  };
  EXPECT_EQ(draws(42), draws(42));
  EXPECT_NE(draws(42), draws(43));
}

TEST(SamplerTest, LogprobsAreTheRawLogSoftmax) {
  std::mt19937_64 rng(1);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  const int vocab = 1000;
  std::vector<float> logits(vocab);
  for (float& x : logits) x = normal(rng) + 50.0f;  // large offset: stability matters
  logits[17] = logits[18] = 70.0f;                   // tied top pair: lower id first
  double max = -1e30, sum = 0.0;
  for (float x : logits) max = std::max<double>(max, x);
  for (float x : logits) sum += std::exp(x - max);
  const auto ref = [&](int32_t id) { return logits[id] - max - std::log(sum); };

  SamplingParams p;
  p.temperature = 0.7f;  // processing must not change the reported logprobs
  p.repetition_penalty = 1.3f;
  p.logit_bias = {{5, 3.0f}};
  p.top_k = 20;
  p.logprobs = 5;
  p.seed = 2;
  Sampler s = Make(p, vocab);
  for (int step = 0; step < 3; ++step) {
    SampledToken t = s.Sample(logits);
    EXPECT_NEAR(t.logprob, ref(t.id), 1e-5);
    ASSERT_EQ(t.top.size(), 5u);
    EXPECT_EQ(t.top[0].id, 17);
    EXPECT_EQ(t.top[1].id, 18);
    std::vector<int32_t> order(vocab);
    for (int i = 0; i < vocab; ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
    for (int k = 0; k < 5; ++k) {
      EXPECT_EQ(t.top[k].id, order[k]);
      EXPECT_NEAR(t.top[k].logprob, ref(order[k]), 1e-5);
    }
  }
  p.logprobs = 0;
  Sampler none = Make(p, vocab);
  EXPECT_TRUE(none.Sample(logits).top.empty());
  // Without logprobs nothing is reported, so the log-softmax is skipped: logprob stays 0.
  p.logprobs = 0;
  Sampler quiet = Make(p, vocab);
  SampledToken t = quiet.Sample(logits);
  EXPECT_EQ(t.logprob, 0.0f);
  EXPECT_TRUE(t.top.empty());
}

TEST(SamplerTest, InvalidParametersNameTheParameter) {
  const auto expect_invalid = [](SamplingParams p, const std::string& name, int vocab = 10) {
    auto s = Sampler::Create(p, vocab);
    ASSERT_FALSE(s.ok()) << name;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find(name), std::string::npos) << s.status();
  };
  SamplingParams p;
  p.temperature = -0.1f;
  expect_invalid(p, "temperature");
  p = {};
  p.temperature = NAN;
  expect_invalid(p, "temperature");
  p = {};
  p.top_p = 0.0f;
  expect_invalid(p, "top_p");
  p.top_p = 1.01f;
  expect_invalid(p, "top_p");
  p = {};
  p.top_k = -2;
  expect_invalid(p, "top_k");
  p = {};
  p.min_p = 1.5f;
  expect_invalid(p, "min_p");
  p.min_p = -0.1f;
  expect_invalid(p, "min_p");
  p = {};
  p.repetition_penalty = 0.0f;
  expect_invalid(p, "repetition_penalty");
  p = {};
  p.presence_penalty = 2.5f;
  expect_invalid(p, "presence_penalty");
  p = {};
  p.frequency_penalty = -2.01f;
  expect_invalid(p, "frequency_penalty");
  p = {};
  p.logprobs = 21;
  expect_invalid(p, "logprobs");
  p.logprobs = -1;
  expect_invalid(p, "logprobs");
  p = {};
  p.logit_bias = {{10, 1.0f}};
  expect_invalid(p, "logit_bias");
  p.logit_bias = {{-1, 1.0f}};
  expect_invalid(p, "logit_bias");
  p.logit_bias = {{3, INFINITY}};
  expect_invalid(p, "logit_bias");
  expect_invalid({}, "vocab_size", 0);
  // The edges are valid.
  p = {};
  p.temperature = 0.0f;
  p.top_p = 1.0f;
  p.top_k = -1;
  p.min_p = 1.0f;
  p.presence_penalty = -2.0f;
  p.frequency_penalty = 2.0f;
  p.logprobs = 20;
  p.logit_bias = {{9, -100.0f}};
  EXPECT_TRUE(Sampler::Create(p, 10).ok());
}

// The kept set of a straightforward reference (double precision, full sort): temperature, top-k
// (ties kept), top-p (a token stays iff the mass before it is < top_p), min-p.
std::vector<double> ReferenceKept(const std::vector<float>& logits, const SamplingParams& p) {
  const size_t n = logits.size();
  std::vector<double> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = logits[i] / static_cast<double>(p.temperature);
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return x[a] > x[b]; });
  std::vector<double> w(n, 0.0);
  const double kth = p.top_k > 0 && static_cast<size_t>(p.top_k) < n ? x[order[p.top_k - 1]] : -INFINITY;
  double total = 0.0;
  for (size_t i = 0; i < n; ++i) {
    if (x[i] >= kth) w[i] = std::exp(x[i] - x[order[0]]);
    total += w[i];
  }
  double before = 0.0;
  std::vector<double> kept(n, 0.0);
  for (size_t r = 0; r < n; ++r) {
    const size_t i = order[r];
    if (w[i] == 0.0 || before >= p.top_p * total) break;
    before += w[i];
    if (w[i] >= p.min_p) kept[i] = w[i];
  }
  return Normalized(kept);
}

TEST(SamplerTest, FiltersMatchASortingReferenceOnRandomLogits) {
  std::mt19937_64 rng(123);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (int trial = 0; trial < 40; ++trial) {
    const int vocab = trial % 2 == 0 ? 40 : 700;
    std::vector<float> logits(vocab);
    for (float& x : logits) x = normal(rng);
    SamplingParams p;
    p.seed = trial;
    p.temperature = 0.3f + 0.1f * static_cast<float>(trial % 12);
    p.top_k = trial % 3 == 0 ? 0 : static_cast<int>(rng() % 60) + 1;
    p.top_p = trial % 4 == 0 ? 1.0f : 0.3f + 0.1f * static_cast<float>(rng() % 7);
    p.min_p = trial % 5 < 2 ? 0.0f : 0.01f * static_cast<float>(rng() % 30);
    const std::vector<double> expected = ReferenceKept(logits, p);
    Sampler s = Make(p, vocab);
    std::vector<int> counts(vocab, 0);
    const int draws = 3000;
    for (int i = 0; i < draws; ++i) ++counts[s.Sample(logits).id];
    for (int i = 0; i < vocab; ++i) {
      if (expected[i] == 0.0) {
        ASSERT_EQ(counts[i], 0) << "trial " << trial << ": id " << i << " is outside the reference set";
      } else {
        const double sigma = std::sqrt(draws * expected[i] * (1.0 - expected[i]));
        EXPECT_NEAR(counts[i], draws * expected[i], 4.5 * sigma + 1.0) << "trial " << trial << " id " << i;
      }
    }
  }
}

TEST(SamplerTest, NanLogitsAndAllBannedFallBackSafely) {
  Sampler g = Make(Greedy(), 3);
  EXPECT_EQ(g.Sample(std::vector<float>{NAN, 1.0f, 0.5f}).id, 1);
  // Greedy reads unadjusted logits in place: NaN is skipped, ties still go to the lowest id, and all
  // NaN / −inf falls back to id 0.
  EXPECT_EQ(g.Sample(std::vector<float>{1.0f, NAN, 3.0f, NAN, 3.0f, 2.0f, 1.0f, 0.0f, 3.0f}).id, 2);
  EXPECT_EQ(g.Sample(std::vector<float>{NAN, NAN, -INFINITY}).id, 0);
  SamplingParams p;
  p.seed = 1;
  Sampler s = Make(p, 3);
  for (int i = 0; i < 200; ++i) EXPECT_NE(s.Sample(std::vector<float>{NAN, 1.0f, 0.5f}).id, 0);
  // Everything banned or −inf: the lowest id that is not banned.
  const int32_t banned[] = {0, 2};
  EXPECT_EQ(s.Sample(std::vector<float>{1.0f, -INFINITY, 2.0f}, banned).id, 1);
  EXPECT_EQ(g.Sample(std::vector<float>{1.0f, -INFINITY, 2.0f}, banned).id, 1);
}

// A model's vocabulary padded past the tokenizer's: logits has rows for ids the tokenizer lacks.
// Those are never picked (greedy in place or adjusted, drawn, the fallback) nor listed as
// alternatives, yet still count in the log-softmax, as the raw distribution's rows.
TEST(SamplerTest, IdsPastTheVocabularyAreNeverPicked) {
  const int vocab = 4;
  // ids 4..7 are padding, with the largest logits.
  const std::vector<float> logits = {0.5f, 2.0f, 1.0f, -1.0f, 9.0f, 8.0f, 7.0f, 9.5f};
  Sampler greedy = Make(Greedy(), vocab);
  EXPECT_EQ(greedy.Sample(logits).id, 1);  // in place
  SamplingParams biased = Greedy();
  biased.logit_bias = {{2, 1.5f}};
  EXPECT_EQ(Make(biased, vocab).Sample(logits).id, 2);  // the adjusted copy
  SamplingParams drawn;
  drawn.seed = 7;
  Sampler d = Make(drawn, vocab);
  for (int i = 0; i < 500; ++i) EXPECT_LT(d.Sample(logits).id, vocab);
  // Every pickable id banned or −inf: the fallback stays inside the vocabulary.
  const int32_t banned[] = {0, 1, 2};
  const std::vector<float> dead = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, 1.0f, 2.0f};
  EXPECT_EQ(greedy.Sample(dead, banned).id, 3);
  EXPECT_EQ(d.Sample(dead, banned).id, 3);
  // Logprobs: alternatives are vocabulary ids; the normaliser is every row's.
  SamplingParams lp = Greedy();
  lp.logprobs = 3;
  SampledToken t = Make(lp, vocab).Sample(logits);
  double z = 0.0;
  for (float x : logits) z += std::exp(static_cast<double>(x));
  EXPECT_EQ(t.id, 1);
  EXPECT_NEAR(t.logprob, 2.0 - std::log(z), 1e-5);
  ASSERT_EQ(t.top.size(), 3u);
  EXPECT_EQ(t.top[0].id, 1);
  EXPECT_EQ(t.top[1].id, 2);
  EXPECT_EQ(t.top[2].id, 0);
  EXPECT_NEAR(t.top[2].logprob, 0.5 - std::log(z), 1e-5);
}

}  // namespace
}  // namespace mcserve::engine
