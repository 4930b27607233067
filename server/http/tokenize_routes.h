// vLLM's tokenizer routes and version: POST /tokenize ({"model"?, "prompt" | "messages",
// "add_special_tokens"?, "add_generation_prompt"?} → {"count", "max_model_len", "tokens"}),
// POST /detokenize ({"model"?, "tokens"} → {"prompt"}) and GET /version ({"version"}). Pure
// functions over the request body; any thread (tokenizing: the parse pool).
#pragma once

#include <cstdint>
#include <string>

#include "engine/model/tokenizer.h"
#include "server/http/chat_template_config.h"
#include "server/http/responses.h"

namespace mcserve::server {

// What the tokenizer routes need: the served model's tokenizer, chat template, name and limits.
struct TokenizeContext {
  const engine::Tokenizer* tokenizer = nullptr;
  const ChatTemplateConfig* chat = nullptr;
  std::string model_name;
  int32_t vocab_size = 0;      // ids /detokenize accepts: [0, vocab_size)
  int64_t max_model_len = 0;   // reported as max_model_len
};

// /tokenize: a prompt (with a BOS unless add_special_tokens is false) or chat messages (through the
// template; add_special_tokens defaults to false there, as vLLM's). 400 naming the field; 404 for
// another model's name.
Response TokenizeResponse(const std::string& body, const TokenizeContext& context);
// /detokenize: token ids in [0, vocab_size) back to text. 400 naming the field.
Response DetokenizeResponse(const std::string& body, const TokenizeContext& context);
// /version: {"version": version}.
Response VersionResponse(const std::string& version);

}  // namespace mcserve::server
