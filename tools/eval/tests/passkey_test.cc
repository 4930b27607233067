// The passkey scorer and prompt builder of mcserve-eval, called directly (no model run).
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"
#include "engine/model/tokenizer.h"
#include "gtest/gtest.h"
#include "tools/eval/passkey_prompt.h"
#include "tools/eval/passkey_score.h"

namespace mcserve::tools {
namespace {

TEST(EvalPasskeyScore, PlantedCorrectAnswerIsCorrect) {
  EXPECT_TRUE(PasskeyAnswerIsCorrect("68213", "68213"));
  EXPECT_TRUE(PasskeyAnswerIsCorrect(" 68213.", "68213"));
  EXPECT_TRUE(PasskeyAnswerIsCorrect("\n 68213 is the pass key", "68213"));
  EXPECT_TRUE(PasskeyAnswerIsCorrect("68213. Remember", "68213"));
}

TEST(EvalPasskeyScore, WrongAnswerIsWrong) {
  EXPECT_FALSE(PasskeyAnswerIsCorrect("68214", "68213"));
  EXPECT_FALSE(PasskeyAnswerIsCorrect(" 12345.", "68213"));
  EXPECT_FALSE(PasskeyAnswerIsCorrect("", "68213"));
  EXPECT_FALSE(PasskeyAnswerIsCorrect("   ", "68213"));
  EXPECT_FALSE(PasskeyAnswerIsCorrect("the pass key is 68213", "68213"));  // not at the start
  EXPECT_FALSE(PasskeyAnswerIsCorrect("x68213", "68213"));
}

TEST(EvalPasskeyScore, PartialAndExtraDigitsAreWrong) {
  EXPECT_FALSE(PasskeyAnswerIsCorrect("6821", "68213"));    // cut short
  EXPECT_FALSE(PasskeyAnswerIsCorrect(" 6821.", "68213"));
  EXPECT_FALSE(PasskeyAnswerIsCorrect("682135", "68213"));  // a different, longer number
  EXPECT_FALSE(PasskeyAnswerIsCorrect("6 8213", "68213"));  // spaces inside the number
  EXPECT_FALSE(PasskeyAnswerIsCorrect("68213", ""));        // no key
}

class EvalPasskeyPrompt : public ::testing::Test {
 protected:
  void SetUp() override {
    auto tokenizer = engine::Tokenizer::Load(std::string(MCSERVE_TEST_DATA_DIR) + "/tokenizer.model");
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = std::move(*tokenizer);
    std::string text;
    for (int i = 0; i < 40; ++i) text += "The cat watched the gulls from the window sill, and the gulls watched the cat. ";
    auto ids = tokenizer_->Encode(text, /*add_bos=*/false);
    ASSERT_TRUE(ids.ok()) << ids.status();
    haystack_ = std::move(*ids);
  }

  std::string Decode(const std::vector<int32_t>& ids) {
    auto text = tokenizer_->Decode(ids);
    EXPECT_TRUE(text.ok()) << text.status();
    return text.ok() ? *text : "";
  }

  std::unique_ptr<engine::Tokenizer> tokenizer_;
  std::vector<int32_t> haystack_;
};

TEST_F(EvalPasskeyPrompt, HasTheLengthTheTemplateAndTheNeedleAtTheDepth) {
  for (const double depth : {0.0, 0.3, 0.5, 1.0}) {
    auto prompt = BuildPasskeyPrompt(*tokenizer_, kStandardPasskeyTemplate, haystack_, 0, 300, depth, "68213");
    ASSERT_TRUE(prompt.ok()) << prompt.status();
    ASSERT_EQ(prompt->ids.size(), 300u);
    EXPECT_EQ(prompt->ids[0], tokenizer_->bos_id());
    const std::string text = Decode(prompt->ids);
    EXPECT_TRUE(absl::StartsWith(text, std::string(kStandardPasskeyTemplate.intro))) << text;
    EXPECT_TRUE(absl::EndsWith(text, std::string(kStandardPasskeyTemplate.question))) << text;
    const std::string needle = absl::StrReplaceAll(std::string(kStandardPasskeyTemplate.needle), {{"{key}", "68213"}});
    EXPECT_TRUE(absl::StrContains(text, " " + needle + " ")) << text;  // between whole words
    // The needle starts at needle_position and sits at (a word start at or after) the asked depth.
    const std::vector<int32_t> from_needle(prompt->ids.begin() + prompt->needle_position, prompt->ids.end());
    EXPECT_TRUE(absl::StartsWith(Decode(from_needle), needle));
    EXPECT_GE(prompt->depth, depth - 1e-9);
    EXPECT_LE(prompt->depth, depth + 6.0 / static_cast<double>(prompt->filler_tokens));
  }
}

TEST_F(EvalPasskeyPrompt, TrainedTemplateAtDepthZeroIsTheTrainingExampleLayout) {
  // tools/train/passkey.py: encode(intro) + filler + encode(question); here without the answer.
  auto prompt = BuildPasskeyPrompt(*tokenizer_, kTrainedPasskeyTemplate, haystack_, 0, 200, 0.0, "31415");
  ASSERT_TRUE(prompt.ok()) << prompt.status();
  std::vector<int32_t> expected = {tokenizer_->bos_id()};
  auto needle = tokenizer_->Encode("The pass key is 31415. Remember it.", /*add_bos=*/false);
  ASSERT_TRUE(needle.ok());
  expected.insert(expected.end(), needle->begin(), needle->end());
  auto question = tokenizer_->Encode("What is the pass key? The pass key is", /*add_bos=*/false);
  ASSERT_TRUE(question.ok());
  const size_t filler = 200 - expected.size() - question->size();
  expected.insert(expected.end(), haystack_.begin(), haystack_.begin() + filler);
  expected.insert(expected.end(), question->begin(), question->end());
  EXPECT_EQ(prompt->ids, expected);
  EXPECT_EQ(prompt->needle_position, 1);
}

TEST(EvalPasskeyTemplate, ByName) {
  EXPECT_EQ(PasskeyTemplateByName("standard")->needle, kStandardPasskeyTemplate.needle);
  EXPECT_EQ(PasskeyTemplateByName("trained")->needle, kTrainedPasskeyTemplate.needle);
  auto unknown = PasskeyTemplateByName("niah");
  ASSERT_FALSE(unknown.ok());
  EXPECT_TRUE(absl::StrContains(unknown.status().message(), "niah"));
}

TEST_F(EvalPasskeyPrompt, WordStartsAreFound) {
  auto ids = tokenizer_->Encode("the window sill", /*add_bos=*/false);
  ASSERT_TRUE(ids.ok());
  int starts = 0;
  for (size_t i = 0; i < ids->size(); ++i) starts += StartsWord(*tokenizer_, *ids, i) ? 1 : 0;
  EXPECT_EQ(starts, 3);
}

TEST_F(EvalPasskeyPrompt, TooShortLengthOrHaystackIsAnError) {
  auto fixed = PasskeyTemplateTokens(*tokenizer_, kStandardPasskeyTemplate, "68213");
  ASSERT_TRUE(fixed.ok());
  EXPECT_TRUE(BuildPasskeyPrompt(*tokenizer_, kStandardPasskeyTemplate, haystack_, 0, *fixed, 0.5, "68213").ok());
  auto short_prompt = BuildPasskeyPrompt(*tokenizer_, kStandardPasskeyTemplate, haystack_, 0, *fixed - 1, 0.5, "68213");
  EXPECT_FALSE(short_prompt.ok());
  EXPECT_TRUE(absl::StrContains(short_prompt.status().message(), "shorter than the passkey template"));
  auto long_prompt = BuildPasskeyPrompt(*tokenizer_, kStandardPasskeyTemplate, haystack_, 0, *fixed + haystack_.size() + 1, 0.5, "68213");
  EXPECT_FALSE(long_prompt.ok());
  EXPECT_TRUE(absl::StrContains(long_prompt.status().message(), "haystack"));
  EXPECT_FALSE(BuildPasskeyPrompt(*tokenizer_, kStandardPasskeyTemplate, haystack_, 0, 300, 1.5, "68213").ok());
}

}  // namespace
}  // namespace mcserve::tools
