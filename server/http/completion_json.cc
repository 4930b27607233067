#include "server/http/completion_json.h"

#include "nlohmann/json.hpp"

namespace mcserve::server {
namespace {

using Json = nlohmann::json;

// Serializes, replacing invalid UTF-8 rather than throwing.
std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

std::string PieceText(const engine::Tokenizer& tokenizer, int32_t id) {
  auto text = tokenizer.Decode(std::vector<int32_t>{id});
  return text.ok() ? *text : std::string();
}

// OpenAI's completions logprobs object for `events`.
Json Logprobs(const std::vector<engine::OutputEvent>& events, const engine::Tokenizer& tokenizer) {
  Json tokens = Json::array(), token_logprobs = Json::array(), top = Json::array();
  for (const engine::OutputEvent& e : events) {
    tokens.push_back(PieceText(tokenizer, e.token_id));
    token_logprobs.push_back(e.logprob);
    Json alternatives = Json::object();
    for (const engine::TokenLogprob& t : e.top) alternatives[PieceText(tokenizer, t.id)] = t.logprob;
    top.push_back(alternatives);
  }
  return Json{{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top}};
}

Json Usage(const CompletionResult& r) {
  const int64_t completion = r.completion_tokens();
  return Json{{"prompt_tokens", r.prompt_tokens},
              {"completion_tokens", completion},
              {"total_tokens", r.prompt_tokens + completion},
              {"prompt_tokens_details", {{"cached_tokens", r.cached_tokens}}}};
}

Json Envelope(const CompletionResult& r, bool chunk) {
  const char* object = r.chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion";
  return Json{{"id", r.id}, {"object", object}, {"created", r.created}, {"model", r.model}};
}

Json FinishReason(engine::FinishReason f) {
  return f == engine::FinishReason::kNone ? Json(nullptr) : Json(OpenAiFinishReason(f));
}

// A streamed choice: `text` as completions' text or a chat delta (with the role when `role`).
Json ChunkChoice(const CompletionResult& r, int index, const std::string& text, bool role) {
  Json choice = {{"index", index}};
  if (r.chat) {
    Json delta = Json::object();
    if (role) delta["role"] = "assistant";
    if (role || !text.empty()) delta["content"] = text;
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = nullptr;
  return choice;
}

}  // namespace

int64_t CompletionResult::completion_tokens() const {
  int64_t total = 0;
  for (const ChoiceResult& c : choices) total += static_cast<int64_t>(c.token_ids.size());
  return total;
}

std::string CompletionJson(const CompletionResult& r, const engine::Tokenizer& tokenizer, bool logprobs) {
  Json out = Envelope(r, /*chunk=*/false);
  out["choices"] = Json::array();
  for (size_t i = 0; i < r.choices.size(); ++i) {
    const ChoiceResult& c = r.choices[i];
    Json choice = {{"index", i}};
    if (r.chat) {
      choice["message"] = {{"role", "assistant"}, {"content", c.text}};
    } else {
      choice["text"] = r.echo_text + c.text;
    }
    choice["logprobs"] = logprobs ? Logprobs(c.logprob_events, tokenizer) : Json(nullptr);
    choice["finish_reason"] = FinishReason(c.finish);
    out["choices"].push_back(std::move(choice));
  }
  out["usage"] = Usage(r);
  return Dump(out);
}

std::string StartChunkJson(const CompletionResult& r, int index) {
  Json out = Envelope(r, /*chunk=*/true);
  out["choices"] = Json::array({ChunkChoice(r, index, r.chat ? std::string() : r.echo_text, /*role=*/r.chat)});
  return Dump(out);
}

std::string ChunkJson(const CompletionResult& r, int index, const engine::OutputEvent& event,
                      const engine::Tokenizer& tokenizer, bool logprobs, bool usage) {
  Json out = Envelope(r, /*chunk=*/true);
  Json choice = ChunkChoice(r, index, event.text, /*role=*/false);
  if (event.is_final()) choice["finish_reason"] = OpenAiFinishReason(event.finish);
  if (logprobs && event.token_id >= 0) choice["logprobs"] = Logprobs(std::vector<engine::OutputEvent>{event}, tokenizer);
  out["choices"] = Json::array({choice});
  if (usage) out["usage"] = Usage(r);
  return Dump(out);
}

std::string UsageChunkJson(const CompletionResult& r) {
  Json out = Envelope(r, /*chunk=*/true);
  out["choices"] = Json::array();
  out["usage"] = Usage(r);
  return Dump(out);
}

std::string ErrorJson(const std::string& message, const std::string& type, int code) {
  return Dump(Json{{"error", {{"message", message}, {"type", type}, {"param", nullptr}, {"code", code}}}});
}

const char* OpenAiFinishReason(engine::FinishReason r) {
  switch (r) {
    case engine::FinishReason::kNone: return "";
    case engine::FinishReason::kLength: return "length";
    case engine::FinishReason::kStop: return "stop";
    case engine::FinishReason::kCancelled: return "abort";
    case engine::FinishReason::kError: return "error";
  }
  return "";
}

}  // namespace mcserve::server
