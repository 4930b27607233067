#include "server/http/openai_completion.h"

#include <cmath>
#include <limits>

#include "absl/numeric/int128.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "nlohmann/json.hpp"

namespace mcserve::server {
namespace {

using Json = nlohmann::json;

absl::Status Bad(const std::string& param, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(param, ": ", why));
}

// A JSON value as the client wrote it, for messages: integers exactly, other numbers as %g.
std::string AsSent(const Json& v) {
  if (v.is_number_unsigned()) return absl::StrCat(v.get<uint64_t>());
  if (v.is_number_integer()) return absl::StrCat(v.get<int64_t>());
  if (v.is_number_float()) return absl::StrCat(v.get<double>());
  return v.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// The value of a JSON number that is a whole number (a float such as 5.0 counts), without any
// narrowing: magnitudes beyond 2^100 are clamped there, outside every range checked. nullopt for
// anything else.
std::optional<absl::int128> WholeNumber(const Json& v) {
  if (v.is_number_unsigned()) return absl::int128(v.get<uint64_t>());
  if (v.is_number_integer()) return absl::int128(v.get<int64_t>());
  if (!v.is_number_float()) return std::nullopt;
  const double d = v.get<double>();
  if (!std::isfinite(d) || d != std::floor(d)) return std::nullopt;
  constexpr double kClamp = 0x1p100;
  if (std::fabs(d) >= kClamp) return d < 0 ? -(absl::int128(1) << 100) : absl::int128(1) << 100;
  return absl::int128(d);
}

// An integer field into `out` (absent or null: unchanged): whole and in [lo, hi] before the cast.
template <typename T>
absl::Status Integer(const Json& body, const char* name, int64_t lo, int64_t hi, T* out) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return absl::OkStatus();
  const std::optional<absl::int128> v = WholeNumber(*it);
  if (!v.has_value()) return Bad(name, absl::StrCat(AsSent(*it), " is not an integer"));
  if (*v < lo || *v > hi) return Bad(name, absl::StrCat(AsSent(*it), " is outside [", lo, ", ", hi, "]"));
  *out = static_cast<T>(*v);
  return absl::OkStatus();
}

// A float field into `out` (absent or null: unchanged): finite and within float's range.
absl::Status Float(const Json& body, const char* name, float* out) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_number()) return Bad(name, absl::StrCat(AsSent(*it), " is not a number"));
  const double v = it->get<double>();
  if (!std::isfinite(v) || std::fabs(v) > std::numeric_limits<float>::max()) {
    return Bad(name, absl::StrCat(AsSent(*it), " is outside the range of a float"));
  }
  *out = static_cast<float>(v);
  return absl::OkStatus();
}

absl::Status Bool(const Json& body, const char* name, bool* out) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_boolean()) return Bad(name, "must be true or false");
  *out = it->get<bool>();
  return absl::OkStatus();
}

// `v` as a token id of a vocabulary of `vocab_size`; nullopt when it is not one.
std::optional<int32_t> TokenId(const Json& v, int32_t vocab_size) {
  const std::optional<absl::int128> id = WholeNumber(v);
  if (!id.has_value() || *id < 0 || *id >= vocab_size) return std::nullopt;
  return static_cast<int32_t>(*id);
}

// The prompt: text (tokenized with a BOS) or token ids in [0, vocab_size).
absl::Status Prompt(const Json& body, const engine::Tokenizer& tokenizer, int32_t vocab_size,
                    std::vector<int32_t>* ids) {
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
    if (!(*it)[0].is_number()) return Bad("prompt", "a batch of prompts is not supported; send one per request");
    for (const Json& v : *it) {
      const std::optional<int32_t> id = TokenId(v, vocab_size);
      if (!id.has_value()) {
        return Bad("prompt", absl::StrCat("token id ", AsSent(v), " is not in the vocabulary [0, ", vocab_size, ")"));
      }
      ids->push_back(*id);
    }
    return absl::OkStatus();
  }
  return Bad("prompt", "must be a string or an array of token ids");
}

absl::Status Stop(const Json& body, int32_t vocab_size, engine::StopCriteria* stop) {
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
    for (const Json& v : *it) {
      const std::optional<int32_t> id = TokenId(v, vocab_size);
      if (!id.has_value()) {
        return Bad("stop_token_ids", absl::StrCat(AsSent(v), " is not a token id (vocabulary [0, ", vocab_size, "))"));
      }
      stop->stop_token_ids.push_back(*id);
    }
  }
  return absl::OkStatus();
}

absl::Status LogitBias(const Json& body, int32_t vocab_size, engine::SamplingParams* p) {
  auto it = body.find("logit_bias");
  if (it == body.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_object()) return Bad("logit_bias", "must be an object of token id → bias");
  for (const auto& [key, value] : it->items()) {
    int64_t id = 0;
    if (!absl::SimpleAtoi(key, &id) || id < 0 || id >= vocab_size) {
      return Bad("logit_bias", absl::StrCat("key \"", key, "\" is not a token id (vocabulary [0, ", vocab_size, "))"));
    }
    if (!value.is_number() || !std::isfinite(value.get<double>()) ||
        std::fabs(value.get<double>()) > std::numeric_limits<float>::max()) {
      return Bad("logit_bias", absl::StrCat("the bias of token ", key, " must be a finite number, not ", AsSent(value)));
    }
    p->logit_bias.emplace_back(static_cast<int32_t>(id), static_cast<float>(value.get<double>()));
  }
  return absl::OkStatus();
}

// `seed`: any JSON integer, signed or not (a negative seed keeps its two's-complement bits).
absl::Status Seed(const Json& body, std::optional<uint64_t>* seed) {
  auto it = body.find("seed");
  if (it == body.end() || it->is_null()) return absl::OkStatus();
  const std::optional<absl::int128> v = WholeNumber(*it);
  if (!v.has_value()) return Bad("seed", absl::StrCat(AsSent(*it), " is not an integer"));
  if (*v < std::numeric_limits<int64_t>::min() || *v > std::numeric_limits<uint64_t>::max()) {
    return Bad("seed", absl::StrCat(AsSent(*it), " is outside [", std::numeric_limits<int64_t>::min(), ", ",
                                    std::numeric_limits<uint64_t>::max(), "]"));
  }
  *seed = static_cast<uint64_t>(*v);
  return absl::OkStatus();
}

absl::Status ParseStreamOptions(const Json& body, CompletionRequest* r) {
  auto it = body.find("stream_options");
  if (it == body.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_object()) return Bad("stream_options", "must be an object");
  if (!r->stream) return Bad("stream_options", "is only allowed with \"stream\": true");
  for (const auto& [key, value] : it->items()) {
    if (key == "include_usage") {
      if (!value.is_null() && !value.is_boolean()) return Bad("stream_options.include_usage", "must be true or false");
      r->include_usage = value.is_boolean() && value.get<bool>();
    } else if (key != "continuous_usage_stats" || (!value.is_null() && !(value.is_boolean() && !value.get<bool>()))) {
      return Bad(absl::StrCat("stream_options.", key), "is not supported");
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseCommonFields(const Json& json, const CompletionLimits& limits, CompletionRequest* r) {
  for (const char* unsupported : {"best_of", "suffix"}) {
    auto it = json.find(unsupported);
    if (it != json.end() && !it->is_null() && !(it->is_boolean() && !it->get<bool>()) &&
        !(std::string(unsupported) == "best_of" && it->is_number() && it->get<double>() == 1)) {
      return Bad(unsupported, "is not supported");
    }
  }
  constexpr int64_t kIntMax = std::numeric_limits<int32_t>::max();
  if (auto it = json.find("model"); it != json.end() && !it->is_null()) {
    if (!it->is_string()) return Bad("model", "must be a string");
    r->model = it->get<std::string>();
  }
  const int32_t vocab = limits.rules.vocab_size;
  engine::SamplingParams& p = r->spec.sampling;
  engine::StopCriteria& stop = r->spec.stop;
  stop.max_tokens = limits.default_max_tokens;
  for (absl::Status s : {Integer(json, "n", 1, kMaxChoices, &r->n), Float(json, "temperature", &p.temperature),
                         Float(json, "top_p", &p.top_p), Integer(json, "top_k", -1, kIntMax, &p.top_k),
                         Float(json, "min_p", &p.min_p), Float(json, "repetition_penalty", &p.repetition_penalty),
                         Float(json, "presence_penalty", &p.presence_penalty),
                         Float(json, "frequency_penalty", &p.frequency_penalty),
                         Integer(json, "max_tokens", 1, limits.rules.max_tokens_limit, &stop.max_tokens),
                         Integer(json, "min_tokens", 0, kIntMax, &stop.min_tokens),
                         Bool(json, "ignore_eos", &stop.ignore_eos),
                         Bool(json, "include_stop_str_in_output", &stop.include_stop_string),
                         Bool(json, "stream", &r->stream), Stop(json, vocab, &stop), LogitBias(json, vocab, &p),
                         Seed(json, &p.seed)}) {
    if (!s.ok()) return s;
  }
  return ParseStreamOptions(json, r);
}

absl::StatusOr<CompletionRequest> ParseCompletionRequest(const std::string& body, const engine::Tokenizer& tokenizer,
                                                         const CompletionLimits& limits) {
  Json json = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return absl::InvalidArgumentError("body: not valid JSON");
  if (!json.is_object()) return absl::InvalidArgumentError("body: must be a JSON object");
  CompletionRequest r;
  MCSERVE_RETURN_IF_ERROR(ParseCommonFields(json, limits, &r));
  MCSERVE_RETURN_IF_ERROR(Prompt(json, tokenizer, limits.rules.vocab_size, &r.spec.prompt));
  MCSERVE_RETURN_IF_ERROR(
      Integer(json, "logprobs", 0, engine::RequestLimits::kMaxLogprobs, &r.spec.sampling.logprobs));
  MCSERVE_RETURN_IF_ERROR(Bool(json, "echo", &r.echo));
  if (r.echo && r.spec.sampling.logprobs > 0) return Bad("echo", "with logprobs is not supported");
  if (r.echo) {
    auto text = tokenizer.Decode(r.spec.prompt);
    if (!text.ok()) return Bad("prompt", std::string(text.status().message()));
    r.echo_text = std::move(*text);
  }
  return r;
}

}  // namespace mcserve::server
