// ChatTemplate: a model's chat template (tokenizer_config.json's `chat_template`), parsed once into a
// tree and rendered per request. A small documented subset of Jinja (docs/http_api.md, "Chat
// templates"), rendered as Hugging Face's transformers renders chat templates (trim_blocks and
// lstrip_blocks on): text; {{ expr }}; {% for x in expr %}; {% if %} / {% elif %} / {% else %};
// {% set x = expr %}; {# comments #}; `-` whitespace control. Expressions: string / integer / true /
// false / none literals, names, `a.b`, `a['b']`, `a[0]`, `+` and `~`, ==, !=, `in`, and, or, not,
// parentheses, `is [not] defined|none|string`, the filters trim and length, loop.index / index0 /
// first / last / length, and raise_exception('...'). Anything else is an error naming the construct,
// never a silently different prompt. Immutable once parsed: Render from any thread.
#pragma once

#include <memory>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace mcserve::server {

namespace chat_template_internal {
struct Node;
}

class ChatTemplate {
 public:
  // Parses `source`. InvalidArgument naming the first construct outside the subset (or the syntax
  // error) and its byte offset.
  static absl::StatusOr<std::unique_ptr<ChatTemplate>> Parse(absl::string_view source);
  ~ChatTemplate();

  // Renders the template with `variables` (a JSON object: messages, bos_token, eos_token,
  // add_generation_prompt, ...). InvalidArgument with the template's own message for
  // raise_exception (the client's messages are at fault); Internal naming the construct for a
  // template error found only now (a type error, reading a field of an undefined value).
  absl::StatusOr<std::string> Render(const nlohmann::json& variables) const;

 private:
  explicit ChatTemplate(std::vector<chat_template_internal::Node> nodes);
  std::vector<chat_template_internal::Node> nodes_;
};

}  // namespace mcserve::server
