#include "server/http/openai_completion.h"

#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace mcserve::server {
namespace {

using Json = nlohmann::json;

absl::Status Bad(const std::string& param, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(param, ": ", why));
}

// A number field into `out` (absent: unchanged).
template <typename T>
absl::Status Number(const Json& body, const char* name, T* out) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_number()) return Bad(name, "must be a number");
  const double v = it->get<double>();
  if (!std::isfinite(v)) return Bad(name, "must be finite");
  if constexpr (std::is_integral_v<T>) {
    if (v != std::floor(v) || std::fabs(v) > 1e15) return Bad(name, "must be an integer");
  }
  *out = static_cast<T>(v);
  return absl::OkStatus();
}

absl::Status Bool(const Json& body, const char* name, bool* out) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_boolean()) return Bad(name, "must be true or false");
  *out = it->get<bool>();
  return absl::OkStatus();
}

absl::Status Prompt(const Json& body, const engine::Tokenizer& tokenizer, std::vector<int32_t>* ids) {
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) return Bad("prompt", "is required");
  if (it->is_string()) {
    const std::string text = it->get<std::string>();
    if (text.empty()) return Bad("prompt", "is empty");
    auto encoded = tokenizer.Encode(text, /*add_bos=*/true);
    if (!encoded.ok()) return Bad("prompt", std::string(encoded.status().message()));
    *ids = std::move(*encoded);
    return absl::OkStatus();
  }
  if (it->is_array()) {
    if (it->empty()) return Bad("prompt", "is empty");
    if (!(*it)[0].is_number_integer()) return Bad("prompt", "a batch of prompts is not supported; send one per request");
    for (const Json& id : *it) {
      if (!id.is_number_integer()) return Bad("prompt", "token ids must be integers");
      const int64_t v = id.get<int64_t>();
      if (v < 0 || v >= tokenizer.vocab_size()) {
        return Bad("prompt", absl::StrCat("token id ", v, " is outside the vocabulary [0, ", tokenizer.vocab_size(), ")"));
      }
      ids->push_back(static_cast<int32_t>(v));
    }
    return absl::OkStatus();
  }
  return Bad("prompt", "must be a string or an array of token ids");
}

absl::Status Stop(const Json& body, engine::StopCriteria* stop) {
  auto it = body.find("stop");
  if (it != body.end() && !it->is_null()) {
    if (it->is_string()) {
      stop->stop_strings.push_back(it->get<std::string>());
    } else if (it->is_array()) {
      for (const Json& s : *it) {
        if (!s.is_string()) return Bad("stop", "must be a string or an array of strings");
        stop->stop_strings.push_back(s.get<std::string>());
      }
    } else {
      return Bad("stop", "must be a string or an array of strings");
    }
  }
  it = body.find("stop_token_ids");
  if (it != body.end() && !it->is_null()) {
    if (!it->is_array()) return Bad("stop_token_ids", "must be an array of token ids");
    for (const Json& id : *it) {
      if (!id.is_number_integer()) return Bad("stop_token_ids", "must be an array of token ids");
      stop->stop_token_ids.push_back(id.get<int32_t>());
    }
  }
  return absl::OkStatus();
}

absl::Status LogitBias(const Json& body, engine::SamplingParams* p) {
  auto it = body.find("logit_bias");
  if (it == body.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_object()) return Bad("logit_bias", "must be an object of token id → bias");
  for (const auto& [key, value] : it->items()) {
    int32_t id = 0;
    if (!absl::SimpleAtoi(key, &id)) return Bad("logit_bias", absl::StrCat("key \"", key, "\" is not a token id"));
    if (!value.is_number() || !std::isfinite(value.get<double>())) {
      return Bad("logit_bias", absl::StrCat("the bias of token ", key, " must be a finite number"));
    }
    p->logit_bias.emplace_back(id, value.get<float>());
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CompletionRequest> ParseCompletionRequest(const std::string& body, const engine::Tokenizer& tokenizer,
                                                         const CompletionLimits& limits) {
  Json json = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return absl::InvalidArgumentError("body: not valid JSON");
  if (!json.is_object()) return absl::InvalidArgumentError("body: must be a JSON object");
  for (const char* unsupported : {"echo", "best_of", "suffix"}) {
    auto it = json.find(unsupported);
    if (it != json.end() && !it->is_null() && !(it->is_boolean() && !it->get<bool>()) &&
        !(std::string(unsupported) == "best_of" && it->is_number() && it->get<double>() == 1)) {
      return Bad(unsupported, "is not supported");
    }
  }
  int n = 1;
  if (absl::Status s = Number(json, "n", &n); !s.ok()) return s;
  if (n != 1) return Bad("n", "only n = 1 is supported");

  CompletionRequest r;
  if (auto it = json.find("model"); it != json.end() && it->is_string()) r.model = it->get<std::string>();
  if (absl::Status s = Prompt(json, tokenizer, &r.spec.prompt); !s.ok()) return s;
  engine::SamplingParams& p = r.spec.sampling;
  engine::StopCriteria& stop = r.spec.stop;
  stop.max_tokens = limits.default_max_tokens;
  int logprobs = 0;
  for (absl::Status s : {Number(json, "temperature", &p.temperature), Number(json, "top_p", &p.top_p),
                         Number(json, "top_k", &p.top_k), Number(json, "min_p", &p.min_p),
                         Number(json, "repetition_penalty", &p.repetition_penalty),
                         Number(json, "presence_penalty", &p.presence_penalty),
                         Number(json, "frequency_penalty", &p.frequency_penalty), Number(json, "logprobs", &logprobs),
                         Number(json, "max_tokens", &stop.max_tokens), Number(json, "min_tokens", &stop.min_tokens),
                         Bool(json, "ignore_eos", &stop.ignore_eos),
                         Bool(json, "include_stop_str_in_output", &stop.include_stop_string),
                         Bool(json, "stream", &r.stream), Stop(json, &stop), LogitBias(json, &p)}) {
    if (!s.ok()) return s;
  }
  if (auto it = json.find("seed"); it != json.end() && !it->is_null()) {
    if (!it->is_number_integer()) return Bad("seed", "must be an integer");
    p.seed = static_cast<uint64_t>(it->get<int64_t>());
  }
  if (stop.max_tokens < 1 || stop.max_tokens > limits.max_tokens_limit) {
    return Bad("max_tokens", absl::StrCat(stop.max_tokens, " is outside [1, ", limits.max_tokens_limit, "]"));
  }
  if (logprobs < 0 || logprobs > 20) return Bad("logprobs", absl::StrCat(logprobs, " is outside [0, 20]"));
  p.logprobs = logprobs;
  return r;
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

namespace {

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
  const int64_t completion = static_cast<int64_t>(r.token_ids.size());
  return Json{{"prompt_tokens", r.prompt_tokens},
              {"completion_tokens", completion},
              {"total_tokens", r.prompt_tokens + completion},
              {"prompt_tokens_details", {{"cached_tokens", r.cached_tokens}}}};
}

Json Envelope(const CompletionResult& r) {
  return Json{{"id", r.id}, {"object", "text_completion"}, {"created", r.created}, {"model", r.model}};
}

// A JSON string for `text`, replacing invalid UTF-8 rather than throwing.
Json Text(const std::string& text) { return Json(text); }

}  // namespace

std::string CompletionJson(const CompletionResult& r, const engine::Tokenizer& tokenizer, bool logprobs) {
  Json out = Envelope(r);
  Json choice = {{"index", 0}, {"text", Text(r.text)}, {"finish_reason", OpenAiFinishReason(r.finish)}};
  choice["logprobs"] = logprobs ? Logprobs(r.logprob_events, tokenizer) : Json(nullptr);
  out["choices"] = Json::array({choice});
  out["usage"] = Usage(r);
  return out.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string CompletionChunkJson(const CompletionResult& r, const engine::OutputEvent& event,
                                const engine::Tokenizer& tokenizer, bool logprobs) {
  Json out = Envelope(r);
  Json choice = {{"index", 0}, {"text", Text(event.text)}};
  choice["finish_reason"] = event.is_final() ? Json(OpenAiFinishReason(event.finish)) : Json(nullptr);
  choice["logprobs"] = logprobs && event.token_id >= 0
                           ? Logprobs(std::vector<engine::OutputEvent>{event}, tokenizer)
                           : Json(nullptr);
  out["choices"] = Json::array({choice});
  if (event.is_final()) out["usage"] = Usage(r);
  return out.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string ErrorJson(const std::string& message, const std::string& type, int code) {
  return Json{{"error", {{"message", message}, {"type", type}, {"param", nullptr}, {"code", code}}}}.dump(
      -1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace mcserve::server
