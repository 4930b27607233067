// ParseChatRequest and ChatPromptIds: messages are checked and named field by field, rendered by the
// model's template with its special tokens' text turned into their ids, a model without a template
// gets vLLM's 400, an unusable template a 500, and chat-only fields (max_completion_tokens,
// add_generation_prompt) and unsupported ones are handled like completions' fields.
#include "server/http/chat_request.h"

#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/unit/server/tokenizer_suite.h"

namespace mcserve::server {
namespace {

using Json = nlohmann::json;

constexpr char kTemplate[] =
    "{{ bos_token }}{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% if m.role == 'assistant' %}"
    "{{ eos_token }}{% endif %}{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}";

class ChatRequestTest : public TokenizerSuite {
 protected:
  void SetUp() override { chat_.chat_template = std::move(*ChatTemplate::Parse(kTemplate)); }

  absl::StatusOr<CompletionRequest> Parse(const std::string& body) {
    const CompletionLimits limits{.rules = {.vocab_size = tokenizer_->vocab_size(), .max_tokens_limit = 4096}};
    return ParseChatRequest(body, *tokenizer_, limits, chat_);
  }
  std::string Error(const std::string& body, absl::StatusCode code = absl::StatusCode::kInvalidArgument) {
    auto r = Parse(body);
    EXPECT_FALSE(r.ok()) << body;
    if (r.ok()) return "";
    EXPECT_EQ(r.status().code(), code) << body << " → " << r.status();
    return std::string(r.status().message());
  }
  std::vector<int32_t> Encode(const std::string& text) { return *tokenizer_->Encode(text, /*add_bos=*/false); }

  ChatTemplateConfig chat_;
};

TEST_F(ChatRequestTest, MessagesRenderWithSpecialTokensAsIds) {
  auto r = Parse(R"({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"},
                                  {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}],
                     "max_tokens": 3, "n": 2, "stream": true, "stream_options": {"include_usage": true}})");
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<int32_t> want = {tokenizer_->bos_id()};
  for (int32_t id : Encode("user: hi\nassistant: yo\n")) want.push_back(id);
  want.push_back(tokenizer_->eos_id());
  for (int32_t id : Encode("user: ab\nassistant:")) want.push_back(id);
  EXPECT_EQ(r->spec.prompt, want);
  EXPECT_TRUE(r->chat);
  EXPECT_EQ(r->n, 2);
  EXPECT_EQ(r->spec.stop.max_tokens, 3);
  EXPECT_TRUE(r->stream && r->include_usage);
}

TEST_F(ChatRequestTest, AddGenerationPromptAndMaxCompletionTokens) {
  auto r = Parse(R"({"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": false,
                     "max_completion_tokens": 7})");
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<int32_t> want = {tokenizer_->bos_id()};
  for (int32_t id : Encode("user: hi\n")) want.push_back(id);
  EXPECT_EQ(r->spec.prompt, want);
  EXPECT_EQ(r->spec.stop.max_tokens, 7);
  EXPECT_EQ(Error(R"({"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 0})"),
            "max_completion_tokens: 0 is outside [1, 4096]");
  EXPECT_EQ(Error(R"({"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 2, "max_tokens": 3})"),
            "max_completion_tokens: differs from max_tokens");
  EXPECT_EQ(Error(R"({"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": "yes"})"),
            "add_generation_prompt: must be true or false");
}

TEST_F(ChatRequestTest, BadMessagesAreNamed) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({})", "messages: is required"},
      {R"({"messages": "hi"})", "messages: must be an array"},
      {R"({"messages": []})", "messages: is empty"},
      {R"({"messages": [3]})", "messages[0]: must be an object"},
      {R"({"messages": [{"content": "x"}]})", "messages[0].role: must be a string"},
      {R"({"messages": [{"role": "wizard", "content": "x"}]})",
       "messages[0].role: \"wizard\" is not one of system, developer, user, assistant, tool"},
      {R"({"messages": [{"role": "user"}]})", "messages[0].content: is required"},
      {R"({"messages": [{"role": "user", "content": 5}]})", "messages[0].content: must be a string or an array"},
      {R"({"messages": [{"role": "user", "content": null}]})", "messages[0].content: must be a string or an array"},
      {R"({"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": [{"type": "image_url"}]}]})",
       "messages[1].content[0].type: \"image_url\" is not supported"},
      {R"({"messages": [{"role": "user", "content": [{"type": "text"}]}]})", "messages[0].content[0].text: must be a string"},
      {R"({"messages": [{"role": "assistant", "content": null, "tool_calls": []}]})", "messages[0].tool_calls: is not supported"},
      {R"({"messages": [{"role": "user", "content": "x"}], "n": 0})", "n: 0 is outside [1, 16]"},
      {R"({"messages": [{"role": "user", "content": "x"}], "n": 99})", "n: 99 is outside [1, 16]"},
      {R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true})", "logprobs: is not supported on chat"},
      {R"({"messages": [{"role": "user", "content": "x"}], "echo": true})", "echo: is not supported on chat"},
      {R"({"messages": [{"role": "user", "content": "x"}], "tools": [{}]})", "tools: is not supported on chat"},
      {R"({"messages": [{"role": "user", "content": "x"}], "temperature": "hot"})", "temperature"},
      {R"({"messages": [{"role": "user", "content": "x"}], "stream_options": {"include_usage": true}})",
       "stream_options: is only allowed with"},
      {R"([1])", "body: must be a JSON object"},
      {R"({"messages": )", "body: not valid JSON"},
  };
  for (const auto& [body, message] : cases) {
    const std::string error = Error(body);
    EXPECT_TRUE(absl::StartsWith(error, message)) << body << " → " << error;
  }
  // An assistant message may have null content (a turn that only called tools, in OpenAI's API).
  EXPECT_TRUE(Parse(R"({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": null}]})").ok());
}

TEST_F(ChatRequestTest, NoTemplateIsVllmsBadRequest) {
  chat_.chat_template.reset();
  EXPECT_TRUE(absl::StrContains(Error(R"({"messages": [{"role": "user", "content": "x"}]})"),
                                "the model has no chat template"));
}

TEST_F(ChatRequestTest, TemplateProblemsAreServerErrorsButRaiseExceptionIsTheClients) {
  chat_.chat_template.reset();
  chat_.error = "tokenizer_config.json: chat template: {% macro %} (at byte 0) is outside the supported subset";
  EXPECT_TRUE(absl::StrContains(Error(R"({"messages": [{"role": "user", "content": "x"}]})", absl::StatusCode::kInternal),
                                "{% macro %}"));
  chat_.error.clear();
  chat_.chat_template = std::move(*ChatTemplate::Parse(
      "{% if messages[0].role != 'user' %}{{ raise_exception('the first message must be the user\\'s') }}{% endif %}"
      "{{ messages[0].content.x }}"));
  EXPECT_TRUE(absl::StrContains(Error(R"({"messages": [{"role": "system", "content": "x"}]})"),
                                "the first message must be the user's"));
  EXPECT_TRUE(absl::StrContains(Error(R"({"messages": [{"role": "user", "content": "x"}]})", absl::StatusCode::kInternal),
                                "chat template: reading \"x\" of a string"));
}

}  // namespace
}  // namespace mcserve::server
