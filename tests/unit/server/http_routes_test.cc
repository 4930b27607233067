// The vLLM-compatible routes on a live HttpServer: /version, /tokenize, /detokenize,
// /v1/chat/completions (with and without a chat template, streamed with include_usage), and n > 1
// on completions, whose later choices resume from the prefix cache blocks choice 0 prefilled.
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/http/chat_template_config.h"
#include "tests/unit/server/http_server_fixture.h"

namespace mcserve::server::testing {
namespace {

using Json = nlohmann::json;

class HttpRoutesTest : public HttpServerFixture {
 protected:
  void ServeWithTemplate() {
    Serve([](HttpServerOptions& o) {
      o.version = "9.9.9";
      o.chat.chat_template = std::move(*ChatTemplate::Parse(
          "{{ bos_token }}{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
          "{% if add_generation_prompt %}assistant:{% endif %}"));
    });
  }
  // The JSON of each `data:` line of a streamed reply ("[DONE]" as a string).
  static std::vector<Json> Events(const std::string& body) {
    std::vector<Json> out;
    for (absl::string_view line : absl::StrSplit(body, '\n', absl::SkipEmpty())) {
      if (!absl::ConsumePrefix(&line, "data: ")) continue;
      out.push_back(line == "[DONE]" ? Json("[DONE]") : Json::parse(line));
    }
    return out;
  }
};

TEST_F(HttpRoutesTest, VersionTokenizeDetokenize) {
  ServeWithTemplate();
  HttpReply r = Get(port(), "/version");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(Json::parse(r.body), (Json{{"version", "9.9.9"}}));
  r = Post(port(), "/tokenize", R"({"model": "gated_deltanet", "prompt": "In the beginning"})");
  ASSERT_EQ(r.status, 200) << r.body;
  const Json tokens = Json::parse(r.body);
  EXPECT_EQ(tokens["count"], tokens["tokens"].size());
  EXPECT_GT(tokens["max_model_len"].get<int64_t>(), 0);
  r = Post(port(), "/detokenize", Json{{"tokens", tokens["tokens"]}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json::parse(r.body)["prompt"], "In the beginning");
  EXPECT_EQ(Post(port(), "/tokenize", R"({"messages": [{"role": "user", "content": "hi"}]})").status, 200);
  EXPECT_EQ(Post(port(), "/detokenize", R"({"tokens": [-4]})").status, 400);
  EXPECT_EQ(Get(port(), "/tokenize").status, 405);
  EXPECT_EQ(Post(port(), "/version", "{}").status, 405);
}

TEST_F(HttpRoutesTest, ChatWithoutATemplateIsA400SayingSo) {
  HttpReply r = Post(port(), "/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi"}]})");
  EXPECT_EQ(r.status, 400);
  EXPECT_TRUE(absl::StrContains(r.body, "the model has no chat template")) << r.body;
  EXPECT_EQ(Get(port(), "/v1/chat/completions").status, 405);
}

TEST_F(HttpRoutesTest, ChatCompletionPlainAndStreamedAgree) {
  ServeWithTemplate();
  const std::string request =
      R"({"model": "gated_deltanet", "messages": [{"role": "user", "content": "In the beginning"}],
          "max_tokens": 6, "temperature": 0, "ignore_eos": true)";
  HttpReply r = Post(port(), "/v1/chat/completions", request + "}");
  ASSERT_EQ(r.status, 200) << r.body;
  const Json plain = Json::parse(r.body);
  EXPECT_EQ(plain["object"], "chat.completion");
  EXPECT_EQ(plain["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(plain["usage"]["completion_tokens"], 6);
  r = Post(port(), "/v1/chat/completions", request + R"(, "stream": true, "stream_options": {"include_usage": true}})");
  ASSERT_EQ(r.status, 200) << r.body;
  const std::vector<Json> events = Events(r.body);
  ASSERT_GE(events.size(), 3u) << r.body;
  EXPECT_EQ(events.front()["choices"][0]["delta"]["role"], "assistant");
  std::string text;
  for (size_t i = 0; i + 2 < events.size(); ++i) {
    EXPECT_EQ(events[i]["object"], "chat.completion.chunk");
    text += events[i]["choices"][0]["delta"].value("content", "");
  }
  EXPECT_EQ(text, plain["choices"][0]["message"]["content"]);
  EXPECT_EQ(events[events.size() - 2]["choices"], Json::array());
  EXPECT_EQ(events[events.size() - 2]["usage"], plain["usage"]);
  EXPECT_EQ(events.back(), "[DONE]");
}

TEST_F(HttpRoutesTest, NChoicesShareThePromptsPrefill) {
  // 150 tokens or so: two whole prefix blocks (64 tokens) for the later choices to resume from.
  std::string prompt;
  for (int i = 0; i < 12; ++i) prompt += "And God said, Let there be light: and there was light. ";
  const Json request = {{"prompt", prompt}, {"max_tokens", 4}, {"temperature", 0}, {"ignore_eos", true}, {"n", 3}};
  HttpReply r = Post(port(), "/v1/completions", request.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const Json j = Json::parse(r.body);
  ASSERT_EQ(j["choices"].size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(j["choices"][i]["index"], i);
    EXPECT_EQ(j["choices"][i]["text"], j["choices"][0]["text"]);  // greedy: the same sample
  }
  EXPECT_EQ(j["usage"]["completion_tokens"], 12);
  EXPECT_GE(engine_->Stats().prompt_tokens_cached, 2 * 128);  // choices 1 and 2 resumed at a block end
  // echo, streamed: the prompt's text opens each choice.
  Json echo = request;
  echo["n"] = 2;
  echo["echo"] = true;
  echo["stream"] = true;
  r = Post(port(), "/v1/completions", echo.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const std::vector<Json> events = Events(r.body);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events[0]["choices"][0]["text"], prompt);
  EXPECT_EQ(events[1]["choices"][0]["text"], prompt);
  EXPECT_EQ(events[1]["choices"][0]["index"], 1);
  EXPECT_EQ(events.back(), "[DONE]");
}

}  // namespace
}  // namespace mcserve::server::testing
