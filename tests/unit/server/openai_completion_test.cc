// ParseCompletionRequest's number handling: every integer field is checked against its range before
// any narrowing cast, fractions are refused, token ids are checked against the vocabulary, and each
// error names the field and the value as the client wrote it.
#include "server/http/openai_completion.h"

#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/unit/server/tokenizer_suite.h"

namespace mcserve::server {
namespace {

class OpenAiCompletionTest : public TokenizerSuite {
 protected:
  absl::StatusOr<CompletionRequest> Parse(const std::string& body) {
    const CompletionLimits limits{.rules = {.vocab_size = vocab(), .max_tokens_limit = 4096}};
    return ParseCompletionRequest(body, *tokenizer_, limits);
  }
  // The error message of a request that must be refused.
  std::string Error(const std::string& body) {
    auto r = Parse(body);
    EXPECT_FALSE(r.ok()) << body;
    if (r.ok()) return "";
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << body;
    return std::string(r.status().message());
  }
  int vocab() const { return tokenizer_->vocab_size(); }
};

TEST_F(OpenAiCompletionTest, MaxTokensBeyondIntIsOutOfRangeNotWrapped) {
  EXPECT_EQ(Error(R"({"prompt": "hi", "max_tokens": 1e12})"), "max_tokens: 1e+12 is outside [1, 4096]");
  EXPECT_EQ(Error(R"({"prompt": "hi", "max_tokens": 4294967297})"), "max_tokens: 4294967297 is outside [1, 4096]");
  EXPECT_EQ(Error(R"({"prompt": "hi", "max_tokens": -4294967295})"), "max_tokens: -4294967295 is outside [1, 4096]");
  EXPECT_EQ(Error(R"({"prompt": "hi", "max_tokens": 18446744073709551615})"),
            "max_tokens: 18446744073709551615 is outside [1, 4096]");
  EXPECT_EQ(Error(R"({"prompt": "hi", "max_tokens": 1e300})"), "max_tokens: 1e+300 is outside [1, 4096]");
  EXPECT_EQ(Error(R"({"prompt": "hi", "max_tokens": 0})"), "max_tokens: 0 is outside [1, 4096]");
}

TEST_F(OpenAiCompletionTest, FractionsAndNonNumbersAreNotIntegers) {
  EXPECT_EQ(Error(R"({"prompt": "hi", "max_tokens": 2.5})"), "max_tokens: 2.5 is not an integer");
  EXPECT_EQ(Error(R"({"prompt": "hi", "max_tokens": "8"})"), R"(max_tokens: "8" is not an integer)");
  EXPECT_EQ(Error(R"({"prompt": "hi", "top_k": 1.5})"), "top_k: 1.5 is not an integer");
  EXPECT_EQ(Error(R"({"prompt": "hi", "seed": 0.5})"), "seed: 0.5 is not an integer");
}

TEST_F(OpenAiCompletionTest, WholeFloatsAreAccepted) {
  auto r = Parse(R"({"prompt": "hi", "max_tokens": 8.0, "top_k": 4e1})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->spec.stop.max_tokens, 8);
  EXPECT_EQ(r->spec.sampling.top_k, 40);
}

TEST_F(OpenAiCompletionTest, EveryIntegerFieldIsRangeChecked) {
  EXPECT_EQ(Error(R"({"prompt": "hi", "min_tokens": 2147483648})"),
            "min_tokens: 2147483648 is outside [0, 2147483647]");
  EXPECT_EQ(Error(R"({"prompt": "hi", "min_tokens": -1})"), "min_tokens: -1 is outside [0, 2147483647]");
  EXPECT_EQ(Error(R"({"prompt": "hi", "n": 4294967297})"), "n: 4294967297 is outside [1, 16]");
  EXPECT_EQ(Error(R"({"prompt": "hi", "n": 17})"), "n: 17 is outside [1, 16]");
  EXPECT_EQ(Error(R"({"prompt": "hi", "n": 0})"), "n: 0 is outside [1, 16]");
  EXPECT_EQ(Error(R"({"prompt": "hi", "top_k": 4294967296})"), "top_k: 4294967296 is outside [-1, 2147483647]");
  EXPECT_EQ(Error(R"({"prompt": "hi", "logprobs": 4294967297})"), "logprobs: 4294967297 is outside [0, 20]");
  EXPECT_EQ(Error(R"({"prompt": "hi", "logprobs": 21})"), "logprobs: 21 is outside [0, 20]");
  EXPECT_EQ(Error(R"({"prompt": "hi", "seed": 1e20})"),
            "seed: 1e+20 is outside [-9223372036854775808, 18446744073709551615]");
}

TEST_F(OpenAiCompletionTest, SeedKeepsAllSixtyFourBits) {
  auto big = Parse(R"({"prompt": "hi", "seed": 18446744073709551615})");
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_EQ(big->spec.sampling.seed, 18446744073709551615u);
  auto negative = Parse(R"({"prompt": "hi", "seed": -1})");
  ASSERT_TRUE(negative.ok()) << negative.status();
  EXPECT_EQ(negative->spec.sampling.seed, 18446744073709551615u);
}

TEST_F(OpenAiCompletionTest, StopTokenIdsMustBeTokenIds) {
  EXPECT_TRUE(absl::StartsWith(Error(R"({"prompt": "hi", "stop_token_ids": [4294967298]})"),
                               "stop_token_ids: 4294967298 is not a token id"));
  EXPECT_TRUE(
      absl::StartsWith(Error(R"({"prompt": "hi", "stop_token_ids": [-1]})"), "stop_token_ids: -1 is not a token id"));
  EXPECT_TRUE(
      absl::StartsWith(Error(R"({"prompt": "hi", "stop_token_ids": [1.5]})"), "stop_token_ids: 1.5 is not a token id"));
  const std::string beyond = std::to_string(vocab());
  EXPECT_TRUE(absl::StartsWith(Error(R"({"prompt": "hi", "stop_token_ids": [)" + beyond + "]}"),
                               "stop_token_ids: " + beyond + " is not a token id"));
  auto ok = Parse(R"({"prompt": "hi", "stop_token_ids": [0, )" + std::to_string(vocab() - 1) + "]}");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->spec.stop.stop_token_ids, (std::vector<int32_t>{0, vocab() - 1}));
}

TEST_F(OpenAiCompletionTest, PromptTokenIdsMustBeInTheVocabulary) {
  EXPECT_TRUE(absl::StartsWith(Error(R"({"prompt": [1, 4294967298]})"), "prompt: token id 4294967298 is not in"));
  EXPECT_TRUE(absl::StartsWith(Error(R"({"prompt": [1, 2.5]})"), "prompt: token id 2.5 is not in"));
  EXPECT_TRUE(absl::StartsWith(Error(R"({"prompt": [-1]})"), "prompt: token id -1 is not in"));
  auto ok = Parse(R"({"prompt": [1, 2, 3.0]})");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->spec.prompt, (std::vector<int32_t>{1, 2, 3}));
}

TEST_F(OpenAiCompletionTest, LogitBiasKeysMustBeTokenIds) {
  EXPECT_TRUE(absl::StartsWith(Error(R"({"prompt": "hi", "logit_bias": {"4294967298": 1}})"),
                               R"(logit_bias: key "4294967298" is not a token id)"));
  EXPECT_TRUE(absl::StartsWith(Error(R"({"prompt": "hi", "logit_bias": {"x": 1}})"),
                               R"(logit_bias: key "x" is not a token id)"));
  EXPECT_TRUE(absl::StartsWith(Error(R"({"prompt": "hi", "logit_bias": {"-3": 1}})"),
                               R"(logit_bias: key "-3" is not a token id)"));
  EXPECT_TRUE(absl::StartsWith(Error(R"({"prompt": "hi", "logit_bias": {"3": 1e300}})"),
                               "logit_bias: the bias of token 3 must be a finite number"));
  auto ok = Parse(R"({"prompt": "hi", "logit_bias": {"3": -2.5}})");
  ASSERT_TRUE(ok.ok()) << ok.status();
  ASSERT_EQ(ok->spec.sampling.logit_bias.size(), 1u);
  EXPECT_EQ(ok->spec.sampling.logit_bias[0].first, 3);
  EXPECT_EQ(ok->spec.sampling.logit_bias[0].second, -2.5f);
}

TEST_F(OpenAiCompletionTest, FloatFieldsOutsideFloatRangeAreRefused) {
  EXPECT_EQ(Error(R"({"prompt": "hi", "temperature": 1e300})"), "temperature: 1e+300 is outside the range of a float");
  EXPECT_EQ(Error(R"({"prompt": "hi", "top_p": "x"})"), R"(top_p: "x" is not a number)");
}

}  // namespace
}  // namespace mcserve::server
