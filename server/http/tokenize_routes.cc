#include "server/http/tokenize_routes.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "server/http/chat_request.h"

namespace mcserve::server {
namespace {

using Json = nlohmann::json;

Response Ok(const Json& body) {
  return Response{.status = 200, .content_type = "application/json", .body = body.dump(-1, ' ', false,
                                                                                      Json::error_handler_t::replace)};
}
Response Bad(const std::string& field, const std::string& why) {
  return ErrorResponse(400, absl::StrCat(field, ": ", why), "invalid_request_error");
}
Response FromStatus(const absl::Status& s) {
  const auto [status, type] = HttpStatusOf(s);
  return ErrorResponse(status, s.message(), type);
}

// The body as a JSON object with an acceptable "model", or the error response in *error.
std::optional<Json> Body(const std::string& body, const TokenizeContext& context, Response* error) {
  Json json = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) {
    *error = ErrorResponse(400, json.is_discarded() ? "body: not valid JSON" : "body: must be a JSON object",
                           "invalid_request_error");
    return std::nullopt;
  }
  auto model = json.find("model");
  if (model != json.end() && !model->is_null()) {
    if (!model->is_string()) {
      *error = Bad("model", "must be a string");
      return std::nullopt;
    }
    if (model->get<std::string>() != context.model_name) {
      *error = ErrorResponse(404, absl::StrCat("model ", model->dump(), " is not served here (", context.model_name, ")"),
                             "invalid_request_error");
      return std::nullopt;
    }
  }
  return json;
}

// A boolean field; `fallback` when absent or null; nullopt (and *error) when not a boolean.
std::optional<bool> BoolField(const Json& json, const char* name, bool fallback, Response* error) {
  auto it = json.find(name);
  if (it == json.end() || it->is_null()) return fallback;
  if (it->is_boolean()) return it->get<bool>();
  *error = Bad(name, "must be true or false");
  return std::nullopt;
}

}  // namespace

Response TokenizeResponse(const std::string& body, const TokenizeContext& context) {
  Response error;
  const std::optional<Json> json = Body(body, context, &error);
  if (!json.has_value()) return error;
  const bool has_prompt = json->contains("prompt") && !(*json)["prompt"].is_null();
  const bool has_messages = json->contains("messages") && !(*json)["messages"].is_null();
  if (has_prompt == has_messages) return Bad("prompt", "give exactly one of prompt and messages");
  const std::optional<bool> special = BoolField(*json, "add_special_tokens", /*fallback=*/has_prompt, &error);
  if (!special.has_value()) return error;
  std::vector<int32_t> ids;
  if (has_prompt) {
    if (!(*json)["prompt"].is_string()) return Bad("prompt", "must be a string");
    auto encoded = context.tokenizer->Encode((*json)["prompt"].get<std::string>(), *special);
    if (!encoded.ok()) return Bad("prompt", std::string(encoded.status().message()));
    ids = std::move(*encoded);
  } else {
    const std::optional<bool> generation = BoolField(*json, "add_generation_prompt", true, &error);
    if (!generation.has_value()) return error;
    auto chat_ids = ChatPromptIds((*json)["messages"], *generation, *context.chat, *context.tokenizer);
    if (!chat_ids.ok()) return FromStatus(chat_ids.status());
    ids = std::move(*chat_ids);
    // The template writes the BOS itself; add_special_tokens asks for one more in front, as vLLM does.
    if (*special && context.tokenizer->bos_id() >= 0) ids.insert(ids.begin(), context.tokenizer->bos_id());
  }
  return Ok(Json{{"count", ids.size()}, {"max_model_len", context.max_model_len}, {"tokens", ids}});
}

Response DetokenizeResponse(const std::string& body, const TokenizeContext& context) {
  Response error;
  const std::optional<Json> json = Body(body, context, &error);
  if (!json.has_value()) return error;
  auto tokens = json->find("tokens");
  if (tokens == json->end() || !tokens->is_array()) return Bad("tokens", "must be an array of token ids");
  std::vector<int32_t> ids;
  for (const Json& t : *tokens) {
    const bool whole = t.is_number_integer() || t.is_number_unsigned() ||
                       (t.is_number_float() && std::isfinite(t.get<double>()) && t.get<double>() == std::floor(t.get<double>()));
    const double v = whole ? t.get<double>() : -1;
    if (!whole || v < 0 || v >= context.vocab_size) {
      return Bad("tokens", absl::StrCat(t.dump(), " is not a token id (vocabulary [0, ", context.vocab_size, "))"));
    }
    ids.push_back(static_cast<int32_t>(v));
  }
  auto text = context.tokenizer->Decode(ids);
  if (!text.ok()) return Bad("tokens", std::string(text.status().message()));
  return Ok(Json{{"prompt", *text}});
}

Response VersionResponse(const std::string& version) { return Ok(Json{{"version", version}}); }

}  // namespace mcserve::server
