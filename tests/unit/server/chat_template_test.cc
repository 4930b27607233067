// ChatTemplate: the supported Jinja subset renders as Hugging Face's transformers would (trim_blocks,
// lstrip_blocks, `-` whitespace control), and every construct outside it is an error naming it —
// at parse time where it can be seen, at render time otherwise — never a silently different prompt.
#include "server/http/chat_template.h"

#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace mcserve::server {
namespace {

using Json = nlohmann::json;

const Json kMessages = Json::parse(R"([{"role": "system", "content": "Be brief."},
                                       {"role": "user", "content": "  Hi  "},
                                       {"role": "assistant", "content": "Hello."},
                                       {"role": "user", "content": "Bye"}])");

std::string Render(const std::string& source, Json variables = Json::object()) {
  auto t = ChatTemplate::Parse(source);
  EXPECT_TRUE(t.ok()) << t.status();
  if (!t.ok()) return "<parse error>";
  if (!variables.contains("messages")) variables["messages"] = kMessages;
  auto out = (*t)->Render(variables);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : "<render error>";
}

// The message of a template the parser must refuse.
std::string ParseError(const std::string& source) {
  auto t = ChatTemplate::Parse(source);
  EXPECT_FALSE(t.ok()) << source;
  if (t.ok()) return "";
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(t.status().message());
}

// The status of a template that parses but must fail to render.
absl::Status RenderError(const std::string& source) {
  auto t = ChatTemplate::Parse(source);
  EXPECT_TRUE(t.ok()) << t.status();
  if (!t.ok()) return t.status();
  auto out = (*t)->Render(Json{{"messages", kMessages}});
  EXPECT_FALSE(out.ok()) << source << " → " << *out;
  return out.ok() ? absl::OkStatus() : out.status();
}

TEST(ChatTemplateTest, LoopsIfChainsAndVariables) {
  const std::string source =
      "{{ bos_token }}{% for message in messages %}"
      "{% if message['role'] == 'system' %}[SYS]{{ message.content }}"
      "{% elif message.role == 'user' %}[U]{{ message['content'] | trim }}"
      "{% else %}[A]{{ message['content'] + eos_token }}{% endif %}"
      "{% endfor %}{% if add_generation_prompt %}[A]{% endif %}";
  EXPECT_EQ(Render(source, {{"bos_token", "<s>"}, {"eos_token", "</s>"}, {"add_generation_prompt", true}}),
            "<s>[SYS]Be brief.[U]Hi[A]Hello.</s>[U]Bye[A]");
  EXPECT_EQ(Render(source, {{"bos_token", "<s>"}, {"eos_token", "</s>"}, {"add_generation_prompt", false}}),
            "<s>[SYS]Be brief.[U]Hi[A]Hello.</s>[U]Bye");
}

TEST(ChatTemplateTest, WhitespaceControlTrimBlocksAndLstripBlocks) {
  // trim_blocks: the newline after a block tag goes; lstrip_blocks: the blanks before it on its line.
  EXPECT_EQ(Render("{% for m in messages %}\n  {% if loop.first %}\n{{ m.role }}\n  {% endif %}\n{% endfor %}"),
            "system\n");
  // `-` strips every whitespace character on its side; output tags keep their newline.
  EXPECT_EQ(Render("a  \n {{- 'b' -}} \n  c{{ 'd' }}\ne"), "abc" "d\ne");
  EXPECT_EQ(Render("{# a comment #}x{#- another -#}  y"), "xy");
  // lstrip_blocks strips only blanks that start a line; a block tag after output on its line keeps them.
  EXPECT_EQ(Render("{{ 'a' }}  {% if true %}b{% endif %}"), "a  b");
  EXPECT_EQ(Render("  {% if true %}b{% endif %}\n  {% if true %}c{% endif %}"), "bc");
  EXPECT_EQ(Render("x\n  {% if true %}c{% endif %}"), "x\nc");
  EXPECT_EQ(Render("{% if true %}\n  {% if true %}c{% endif %}\n{% endif %}"), "c");
}

TEST(ChatTemplateTest, LoopVariablesSetAndTests) {
  EXPECT_EQ(Render("{% for m in messages %}{{ loop.index0 }}{{ loop.index }}{% if loop.last %}!{% endif %}"
                   "{% endfor %}{{ messages | length }}"),
            "01122334!4");
  EXPECT_EQ(Render("{% set sep = '|' %}{% for m in messages %}{% if not loop.first %}{{ sep }}{% endif %}"
                   "{{ m.role }}{% endfor %}"),
            "system|user|assistant|user");
  EXPECT_EQ(Render("{% if tools is defined %}T{% endif %}{% if tools is not defined %}U{% endif %}"
                   "{% if messages[0].role == 'system' and messages[-1]['role'] != 'assistant' %}S{% endif %}"
                   "{% if 'sys' in messages[0].role %}I{% endif %}{% if none is none %}N{% endif %}"
                   "{{ 'a' ~ 1 ~ true }}{{ 1 + 2 }}{{ undefined_thing }}"),
            "USINa1True3");
  EXPECT_EQ(Render("{% set x = 'outer' %}{% for m in messages %}{% set x = 'inner' %}{% endfor %}{{ x }}"), "outer");
}

TEST(ChatTemplateTest, RaiseExceptionIsTheClientsError) {
  const absl::Status s = RenderError(
      "{% for m in messages %}{% if m.role == 'assistant' %}{{ raise_exception('no assistant turns') }}"
      "{% endif %}{% endfor %}");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "no assistant turns")) << s;
}

TEST(ChatTemplateTest, RenderTimeTemplateErrorsAreInternalAndNamed) {
  absl::Status s = RenderError("{{ nothing.content }}");
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(absl::StrContains(s.message(), "of an undefined value")) << s;
  s = RenderError("{{ 'a' + 1 }}");
  EXPECT_TRUE(absl::StrContains(s.message(), "\"+\" of a string and a number")) << s;
  s = RenderError("{{ messages[0] }}");
  EXPECT_TRUE(absl::StrContains(s.message(), "printing a mapping")) << s;
  s = RenderError("{% for c in messages[0].role %}{% endfor %}");
  EXPECT_TRUE(absl::StrContains(s.message(), "{% for %} over a string")) << s;
}

TEST(ChatTemplateTest, ConstructsOutsideTheSubsetAreNamed) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{% macro m() %}{% endmacro %}", "{% macro %}"},
      {"{% for m in messages if m.role %}{% endfor %}", "filtered {% for ... if %}"},
      {"{% for k, v in x %}{% endfor %}", "unpacking"},
      {"{{ messages | tojson }}", "the filter \"tojson\""},
      {"{{ m.content.strip() }}", "calling a method"},
      {"{{ 2 * 3 }}", "the operator \"*\""},
      {"{{ 1.5 }}", "a float literal"},
      {"{{ messages[1:] }}", "slicing"},
      {"{{ [1, 2] }}", "a list literal"},
      {"{{ x is mapping }}", "the test \"mapping\""},
      {"{{ range(3) }}", "calling \"range\""},
      {"{{ 'a' if x else 'b' }}", "\"if\" here"},
      {"{%+ if x %}{% endif %}", "\"+\" whitespace control"},
      {"{% for m in messages %}{% else %}{% endfor %}", "{% for %}...{% else %}"},
  };
  for (const auto& [source, construct] : cases) {
    const std::string error = ParseError(source);
    EXPECT_TRUE(absl::StrContains(error, construct)) << source << " → " << error;
    EXPECT_TRUE(absl::StrContains(error, "outside the supported subset")) << source << " → " << error;
  }
}

TEST(ChatTemplateTest, SyntaxErrorsAreRefused) {
  for (const char* source : {"{{ 'a'", "{% if x %}", "{% for m in messages %}", "{% endif %}", "{{ 'abc }}",
                             "{% if x %}{% else %}{% elif y %}{% endif %}", "{{ }}", "{% %}"}) {
    EXPECT_FALSE(ChatTemplate::Parse(source).ok()) << source;
  }
}

}  // namespace
}  // namespace mcserve::server
