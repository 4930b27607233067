// vLLM's /tokenize, /detokenize and /version bodies: shapes, add_special_tokens, chat messages
// through the template, and bad requests named by field.
#include "server/http/tokenize_routes.h"

#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/unit/server/tokenizer_suite.h"
#include "nlohmann/json.hpp"

namespace mcserve::server {
namespace {

using Json = nlohmann::json;

class TokenizeRoutesTest : public TokenizerSuite {
 protected:
  void SetUp() override {
    chat_.chat_template = std::move(*ChatTemplate::Parse("{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}"));
    context_ = {.tokenizer = tokenizer_, .chat = &chat_, .model_name = "m", .vocab_size = tokenizer_->vocab_size(),
                .max_model_len = 2048};
  }
  // A request's 400 message (and that it is one).
  std::string Bad(const Response& r) {
    EXPECT_EQ(r.status, 400) << r.body;
    return Json::parse(r.body)["error"]["message"];
  }

  ChatTemplateConfig chat_;
  TokenizeContext context_;
};

TEST_F(TokenizeRoutesTest, PromptAndMessages) {
  const std::vector<int32_t> plain = *tokenizer_->Encode("In the beginning", /*add_bos=*/false);
  Response r = TokenizeResponse(R"({"model": "m", "prompt": "In the beginning"})", context_);
  ASSERT_EQ(r.status, 200) << r.body;
  Json j = Json::parse(r.body);
  std::vector<int32_t> with_bos = {tokenizer_->bos_id()};
  with_bos.insert(with_bos.end(), plain.begin(), plain.end());
  EXPECT_EQ(j, (Json{{"count", with_bos.size()}, {"max_model_len", 2048}, {"tokens", with_bos}}));
  j = Json::parse(TokenizeResponse(R"({"prompt": "In the beginning", "add_special_tokens": false})", context_).body);
  EXPECT_EQ(j["tokens"], Json(plain));
  // Messages: the template's own BOS; add_special_tokens defaults to false for them.
  j = Json::parse(TokenizeResponse(R"({"messages": [{"role": "user", "content": "In the beginning"}]})", context_).body);
  EXPECT_EQ(j["tokens"], Json(with_bos));
  EXPECT_EQ(j["count"], with_bos.size());
}

TEST_F(TokenizeRoutesTest, BadTokenizeRequests) {
  EXPECT_EQ(Bad(TokenizeResponse("{}", context_)), "prompt: give exactly one of prompt and messages");
  EXPECT_EQ(Bad(TokenizeResponse(R"({"prompt": "a", "messages": []})", context_)),
            "prompt: give exactly one of prompt and messages");
  EXPECT_EQ(Bad(TokenizeResponse(R"({"prompt": 5})", context_)), "prompt: must be a string");
  EXPECT_EQ(Bad(TokenizeResponse(R"({"prompt": "a", "add_special_tokens": 1})", context_)),
            "add_special_tokens: must be true or false");
  EXPECT_EQ(Bad(TokenizeResponse(R"({"prompt": "a", "model": 3})", context_)), "model: must be a string");
  EXPECT_EQ(Bad(TokenizeResponse(R"({"messages": [{"role": "bot", "content": "a"}]})", context_)).substr(0, 17),
            "messages[0].role:");
  EXPECT_EQ(Bad(TokenizeResponse("[]", context_)), "body: must be a JSON object");
  EXPECT_EQ(TokenizeResponse(R"({"prompt": "a", "model": "other"})", context_).status, 404);
  chat_.chat_template.reset();
  EXPECT_TRUE(absl::StrContains(Bad(TokenizeResponse(R"({"messages": [{"role": "user", "content": "a"}]})", context_)),
                                "no chat template"));
}

TEST_F(TokenizeRoutesTest, DetokenizeAndVersion) {
  const std::vector<int32_t> ids = *tokenizer_->Encode("In the beginning", /*add_bos=*/true);
  Response r = DetokenizeResponse(Json{{"model", "m"}, {"tokens", ids}}.dump(), context_);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json::parse(r.body), (Json{{"prompt", "In the beginning"}}));
  EXPECT_EQ(Bad(DetokenizeResponse("{}", context_)), "tokens: must be an array of token ids");
  EXPECT_TRUE(absl::StartsWith(Bad(DetokenizeResponse(R"({"tokens": [1, -1]})", context_)), "tokens: -1 is not a token id"));
  EXPECT_TRUE(absl::StartsWith(Bad(DetokenizeResponse(R"({"tokens": [1.5]})", context_)), "tokens: 1.5 is not"));
  EXPECT_TRUE(absl::StartsWith(Bad(DetokenizeResponse(R"({"tokens": ["a"]})", context_)), "tokens: \"a\" is not"));
  EXPECT_TRUE(absl::StartsWith(Bad(DetokenizeResponse(R"({"tokens": [1e30]})", context_)), "tokens: 1e+30 is not"));
  EXPECT_EQ(Json::parse(VersionResponse("1.2.3").body), (Json{{"version", "1.2.3"}}));
}

}  // namespace
}  // namespace mcserve::server
