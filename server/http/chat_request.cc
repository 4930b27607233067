#include "server/http/chat_request.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"

namespace mcserve::server {
namespace {

using Json = nlohmann::json;

absl::Status Bad(const std::string& field, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

// A message's content as one string: a string, or the text parts of an array joined.
absl::StatusOr<std::string> Content(const Json& content, const std::string& field, bool may_be_null) {
  if (content.is_string()) return content.get<std::string>();
  if (content.is_null() && may_be_null) return std::string();
  if (!content.is_array()) return Bad(field, "must be a string or an array of text parts");
  std::string text;
  for (size_t j = 0; j < content.size(); ++j) {
    const Json& part = content[j];
    const std::string at = absl::StrCat(field, "[", j, "]");
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string()) {
      return Bad(at, "must be an object with a \"type\"");
    }
    if (part["type"] != "text") return Bad(at + ".type", absl::StrCat(part["type"].dump(), " is not supported"));
    if (!part.contains("text") || !part["text"].is_string()) return Bad(at + ".text", "must be a string");
    text += part["text"].get<std::string>();
  }
  return text;
}

// The messages checked and reduced to {role, content} with string content.
absl::StatusOr<Json> Messages(const Json& messages) {
  if (!messages.is_array()) return Bad("messages", "must be an array of messages");
  if (messages.empty()) return Bad("messages", "is empty");
  Json out = Json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const Json& m = messages[i];
    const std::string at = absl::StrCat("messages[", i, "]");
    if (!m.is_object()) return Bad(at, "must be an object");
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) return Bad(at + ".role", "must be a string");
    const std::string r = role->get<std::string>();
    if (std::find(std::begin(kChatRoles), std::end(kChatRoles), r) == std::end(kChatRoles)) {
      return Bad(at + ".role", absl::StrCat(role->dump(), " is not one of ", absl::StrJoin(kChatRoles, ", ")));
    }
    for (const char* unsupported : {"tool_calls", "function_call"}) {
      if (m.contains(unsupported) && !m[unsupported].is_null()) return Bad(at + "." + unsupported, "is not supported");
    }
    auto content = m.find("content");
    if (content == m.end() && r != "assistant") return Bad(at + ".content", "is required");
    MCSERVE_ASSIGN_OR_RETURN(std::string text,
                             Content(content == m.end() ? Json() : *content, at + ".content", r == "assistant"));
    out.push_back(Json{{"role", r}, {"content", std::move(text)}});
  }
  return out;
}

// `text` tokenized with occurrences of the special tokens' text turned into their ids.
absl::StatusOr<std::vector<int32_t>> EncodeWithSpecials(const std::string& text, const ChatTemplateConfig& chat,
                                                        const engine::Tokenizer& tokenizer) {
  std::vector<int32_t> ids;
  size_t at = 0;
  while (at <= text.size()) {
    size_t next = std::string::npos, length = 0;
    int32_t id = -1;
    for (const auto& [token, token_id] : {std::pair{&chat.bos_token, tokenizer.bos_id()},
                                          std::pair{&chat.eos_token, tokenizer.eos_id()}}) {
      if (token->empty() || token_id < 0) continue;
      const size_t found = text.find(*token, at);
      if (found < next) next = found, length = token->size(), id = token_id;
    }
    const std::string_view plain = std::string_view(text).substr(at, next == std::string::npos ? next : next - at);
    if (!plain.empty()) {
      auto encoded = tokenizer.Encode(plain, /*add_bos=*/false);
      if (!encoded.ok()) return Bad("messages", std::string(encoded.status().message()));
      ids.insert(ids.end(), encoded->begin(), encoded->end());
    }
    if (next == std::string::npos) break;
    ids.push_back(id);
    at = next + length;
  }
  return ids;
}

}  // namespace

absl::StatusOr<std::vector<int32_t>> ChatPromptIds(const Json& messages, bool add_generation_prompt,
                                                   const ChatTemplateConfig& chat, const engine::Tokenizer& tokenizer) {
  MCSERVE_ASSIGN_OR_RETURN(Json normalized, Messages(messages));
  if (!chat.error.empty()) return absl::InternalError(absl::StrCat("the model's chat template is unusable: ", chat.error));
  if (chat.chat_template == nullptr) {
    return absl::InvalidArgumentError(
        "the model has no chat template (tokenizer_config.json's chat_template), so chat completions are not "
        "available; use /v1/completions with a prompt");
  }
  const Json variables = {{"messages", std::move(normalized)},
                          {"add_generation_prompt", add_generation_prompt},
                          {"bos_token", chat.bos_token},
                          {"eos_token", chat.eos_token}};
  MCSERVE_ASSIGN_OR_RETURN(std::string prompt, chat.chat_template->Render(variables));
  if (prompt.empty()) return Bad("messages", "the chat template rendered an empty prompt");
  MCSERVE_ASSIGN_OR_RETURN(std::vector<int32_t> ids, EncodeWithSpecials(prompt, chat, tokenizer));
  if (ids.empty()) return Bad("messages", "the chat template rendered a prompt of no tokens");
  return ids;
}

absl::StatusOr<CompletionRequest> ParseChatRequest(const std::string& body, const engine::Tokenizer& tokenizer,
                                                   const CompletionLimits& limits, const ChatTemplateConfig& chat) {
  Json json = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return absl::InvalidArgumentError("body: not valid JSON");
  if (!json.is_object()) return absl::InvalidArgumentError("body: must be a JSON object");
  for (const char* unsupported : {"logprobs", "top_logprobs", "echo", "tools", "tool_choice", "functions",
                                  "function_call", "response_format", "prompt"}) {
    auto it = json.find(unsupported);
    if (it != json.end() && !it->is_null() && !(it->is_boolean() && !it->get<bool>())) {
      return Bad(unsupported, "is not supported on chat completions");
    }
  }
  CompletionRequest r;
  r.chat = true;
  // max_completion_tokens is OpenAI's newer name of max_tokens; both may not disagree.
  if (auto it = json.find("max_completion_tokens"); it != json.end() && !it->is_null()) {
    if (json.contains("max_tokens") && !json["max_tokens"].is_null() && json["max_tokens"] != *it) {
      return Bad("max_completion_tokens", "differs from max_tokens");
    }
    json["max_tokens"] = *it;
  }
  if (absl::Status s = ParseCommonFields(json, limits, &r); !s.ok()) {
    if (json.contains("max_completion_tokens") && absl::StartsWith(s.message(), "max_tokens:")) {
      return Bad("max_completion_tokens", std::string(s.message().substr(12)));
    }
    return s;
  }
  bool add_generation_prompt = true;
  if (auto it = json.find("add_generation_prompt"); it != json.end() && !it->is_null()) {
    if (!it->is_boolean()) return Bad("add_generation_prompt", "must be true or false");
    add_generation_prompt = it->get<bool>();
  }
  auto messages = json.find("messages");
  if (messages == json.end() || messages->is_null()) return Bad("messages", "is required");
  MCSERVE_ASSIGN_OR_RETURN(r.spec.prompt, ChatPromptIds(*messages, add_generation_prompt, chat, tokenizer));
  return r;
}

}  // namespace mcserve::server
