// CheckRequest: the one set of rules both front ends' requests meet in Engine::Submit. Each rule is
// checked at its edges, and each error names the field and the value.
#include "engine/serving/request_rules.h"

#include <gtest/gtest.h>

#include <string>

namespace mcserve::engine {
namespace {

constexpr RequestLimits kLimits{.vocab_size = 100, .max_prompt_tokens = 8, .max_tokens_limit = 50};

RequestSpec Valid() {
  RequestSpec spec;
  spec.prompt = {0, 99};
  spec.stop.max_tokens = 50;
  return spec;
}

std::string Error(const RequestSpec& spec) {
  const absl::Status s = CheckRequest(spec, kLimits);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  return std::string(s.message());
}

TEST(RequestRulesTest, AValidRequestPassesAtEveryEdge) {
  RequestSpec spec = Valid();
  spec.prompt.assign(8, 99);
  spec.stop.min_tokens = 50;
  spec.stop.stop_token_ids = {0, 99};
  spec.sampling.logprobs = 20;
  spec.sampling.logit_bias = {{0, 1.0f}, {99, -1.0f}};
  EXPECT_TRUE(CheckRequest(spec, kLimits).ok());
}

TEST(RequestRulesTest, PromptIdsAreInTheVocabularyAndWithinTheLength) {
  RequestSpec spec = Valid();
  spec.prompt.clear();
  EXPECT_EQ(Error(spec), "prompt is empty: at least one token is needed");
  spec.prompt.assign(9, 1);
  EXPECT_EQ(Error(spec), "prompt has 9 tokens, more than max_prompt_tokens = 8");
  spec.prompt = {1, 100};
  EXPECT_EQ(Error(spec), "prompt token 1 has id 100, outside the vocabulary [0, 100)");
  spec.prompt = {-1};
  EXPECT_EQ(Error(spec), "prompt token 0 has id -1, outside the vocabulary [0, 100)");
}

TEST(RequestRulesTest, MaxAndMinTokensAreWithinTheLimit) {
  RequestSpec spec = Valid();
  spec.stop.max_tokens = 0;
  EXPECT_EQ(Error(spec), "max_tokens: 0 is outside [1, 50]");
  spec.stop.max_tokens = 51;
  EXPECT_EQ(Error(spec), "max_tokens: 51 is outside [1, 50]");
  spec = Valid();
  spec.stop.min_tokens = 51;
  EXPECT_EQ(Error(spec), "min_tokens: 51 is outside [0, 50]");
  spec.stop.min_tokens = -1;
  EXPECT_EQ(Error(spec), "min_tokens: -1 is outside [0, 50]");
}

TEST(RequestRulesTest, StopIdsAndLogitBiasKeysAreInTheVocabulary) {
  RequestSpec spec = Valid();
  spec.stop.stop_token_ids = {3, 100};
  EXPECT_EQ(Error(spec), "stop_token_ids[1]: 100 is outside the vocabulary [0, 100)");
  spec = Valid();
  spec.sampling.logit_bias = {{-2, 1.0f}};
  EXPECT_EQ(Error(spec), "logit_bias: token id -2 is outside the vocabulary [0, 100)");
}

TEST(RequestRulesTest, LogprobsAreAtMostTwenty) {
  RequestSpec spec = Valid();
  spec.sampling.logprobs = 21;
  EXPECT_EQ(Error(spec), "logprobs: 21 is outside [0, 20]");
  spec.sampling.logprobs = -1;
  EXPECT_EQ(Error(spec), "logprobs: -1 is outside [0, 20]");
}

}  // namespace
}  // namespace mcserve::engine

namespace mcserve::engine {
namespace {

// A model with a learned position table (gam): prompt + max_tokens must fit block_size.
TEST(RequestRulesTest, PromptPlusMaxTokensFitTheModelsPositions) {
  RequestLimits limits = kLimits;
  limits.max_positions = 10;
  RequestSpec spec = Valid();  // 2 prompt tokens
  spec.stop.max_tokens = 8;
  EXPECT_TRUE(CheckRequest(spec, limits).ok());
  spec.stop.max_tokens = 9;
  const absl::Status s = CheckRequest(spec, limits);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "prompt (2 tokens) + max_tokens (9) = 11 is more than the model's position limit block_size = 10 tokens");
  limits.max_positions = 0;  // no limit
  EXPECT_TRUE(CheckRequest(spec, limits).ok());
}

}  // namespace
}  // namespace mcserve::engine
