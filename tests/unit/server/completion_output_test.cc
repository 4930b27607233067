// The JSON shapes of OpenAI / vLLM responses as CompletionOutput writes them: n choices, echo, chat
// message and delta, the role chunk, stream_options.include_usage's last chunk with empty choices,
// and [DONE] after every choice has finished.
#include "server/http/completion_output.h"

#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/unit/server/tokenizer_suite.h"
#include "nlohmann/json.hpp"

namespace mcserve::server {
namespace {

using Json = nlohmann::json;

class CompletionOutputTest : public TokenizerSuite {
 protected:
  static CompletionResult Result(int n, bool chat, std::string echo = "") {
    return CompletionResult{.id = chat ? "chatcmpl-7" : "cmpl-7", .model = "m", .created = 5, .chat = chat,
                            .echo_text = std::move(echo), .choices = std::vector<ChoiceResult>(n), .prompt_tokens = 4};
  }
  static engine::OutputEvent Token(int32_t id, std::string text) {
    engine::OutputEvent e;
    e.token_id = id;
    e.text = std::move(text);
    return e;
  }
  static engine::OutputEvent Final(int32_t id, std::string text) {
    engine::OutputEvent e = Token(id, std::move(text));
    e.finish = engine::FinishReason::kLength;
    return e;
  }
  // The JSON of each `data:` event in `sse` ("[DONE]" as a string).
  static std::vector<Json> Events(const std::string& sse) {
    std::vector<Json> out;
    for (absl::string_view line : absl::StrSplit(sse, "\n\n", absl::SkipEmpty())) {
      EXPECT_TRUE(absl::ConsumePrefix(&line, "data: ")) << line;
      out.push_back(line == "[DONE]" ? Json("[DONE]") : Json::parse(line));
    }
    return out;
  }
};

TEST_F(CompletionOutputTest, CompletionWithTwoChoicesAndEcho) {
  CompletionOutput out(Result(2, false, "Hello"), tokenizer_, {});
  out.Add(1, Final(9, " b"), nullptr);
  EXPECT_FALSE(out.finished());
  out.Add(0, Token(8, " a"), nullptr);
  out.Add(0, Final(7, "!"), nullptr);
  ASSERT_TRUE(out.finished());
  const Json j = Json::parse(out.Finished().body);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["id"], "cmpl-7");
  ASSERT_EQ(j["choices"].size(), 2u);
  EXPECT_EQ(j["choices"][0], (Json{{"index", 0}, {"text", "Hello a!"}, {"logprobs", nullptr}, {"finish_reason", "length"}}));
  EXPECT_EQ(j["choices"][1]["text"], "Hello b");
  EXPECT_EQ(j["choices"][1]["index"], 1);
  EXPECT_EQ(j["usage"]["prompt_tokens"], 4);
  EXPECT_EQ(j["usage"]["completion_tokens"], 3);
  EXPECT_EQ(j["usage"]["total_tokens"], 7);
}

TEST_F(CompletionOutputTest, ChatMessageShape) {
  CompletionOutput out(Result(1, true), tokenizer_, {});
  out.Add(0, Token(8, "Hi"), nullptr);
  out.Add(0, Final(7, "."), nullptr);
  const Json j = Json::parse(out.Finished().body);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["id"], "chatcmpl-7");
  EXPECT_EQ(j["choices"][0]["message"], (Json{{"role", "assistant"}, {"content", "Hi."}}));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_FALSE(j["choices"][0].contains("text"));
}

TEST_F(CompletionOutputTest, ChatStreamWithIncludeUsage) {
  CompletionOutput out(Result(2, true), tokenizer_, {.stream = true, .include_usage = true});
  std::vector<Json> events = Events(out.Start());
  ASSERT_EQ(events.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(events[i]["object"], "chat.completion.chunk");
    EXPECT_EQ(events[i]["choices"][0]["index"], i);
    EXPECT_EQ(events[i]["choices"][0]["delta"], (Json{{"role", "assistant"}, {"content", ""}}));
    EXPECT_TRUE(events[i]["choices"][0]["finish_reason"].is_null());
    EXPECT_FALSE(events[i].contains("usage"));
  }
  std::string sse;
  out.Add(0, Token(8, "Hi"), &sse);
  out.Add(0, Final(7, ""), &sse);
  out.Add(1, Final(6, "Yo"), &sse);
  events = Events(sse);
  ASSERT_EQ(events.size(), 5u) << sse;
  EXPECT_EQ(events[0]["choices"][0]["delta"], (Json{{"content", "Hi"}}));
  EXPECT_EQ(events[1]["choices"][0]["delta"], Json::object());
  EXPECT_EQ(events[1]["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(events[2]["choices"][0]["index"], 1);
  EXPECT_EQ(events[2]["choices"][0]["delta"], (Json{{"content", "Yo"}}));
  EXPECT_FALSE(events[2].contains("usage"));  // with include_usage, only the last chunk has usage
  EXPECT_EQ(events[3]["choices"], Json::array());
  EXPECT_EQ(events[3]["usage"]["completion_tokens"], 3);
  EXPECT_EQ(events[3]["usage"]["total_tokens"], 7);
  EXPECT_EQ(events[4], "[DONE]");
}

TEST_F(CompletionOutputTest, CompletionStreamEchoesThePromptFirst) {
  CompletionOutput out(Result(1, false, "Hello"), tokenizer_, {.stream = true});
  std::vector<Json> events = Events(out.Start());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["choices"][0]["text"], "Hello");
  std::string sse;
  out.Add(0, Final(7, " there"), &sse);
  events = Events(sse);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0]["choices"][0]["text"], " there");
  EXPECT_EQ(events[0]["usage"]["completion_tokens"], 1);  // without include_usage: on the last chunk
  EXPECT_EQ(events[1], "[DONE]");
  // No echo and no chat: nothing before the first token.
  EXPECT_EQ(CompletionOutput(Result(1, false), tokenizer_, {.stream = true}).Start(), "");
}

}  // namespace
}  // namespace mcserve::server
