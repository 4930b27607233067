// The OpenAI-compatible `/v1/completions` request body: parsing a JSON request into the engine's
// RequestSpec (every parameter vLLM's completions route takes that the engine supports; the rest
// named in an error), and the fields chat completions share with it. Pure functions; any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/tokenizer.h"
#include "engine/serving/output_channel.h"
#include "engine/serving/request.h"
#include "engine/serving/request_rules.h"
#include "nlohmann/json.hpp"

namespace mcserve::server {

// The most choices (`n`) one request may ask for: each takes a state slot while it runs.
inline constexpr int kMaxChoices = 16;

// A parsed completions or chat completions request.
struct CompletionRequest {
  engine::RequestSpec spec;    // prompt ids, sampling and stop rules (the same for every choice)
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a last chunk with usage and no choices
  bool echo = false;           // completions: the prompt's text starts every choice's text
  bool chat = false;           // a chat completion (its response shapes)
  int n = 1;                   // independent samples of the prompt, in [1, kMaxChoices]
  std::string echo_text;       // the prompt's text when echo
  std::string model;           // as given ("" when absent)
};

// What a completions request is held to: the engine's request rules (Engine::limits(), the same
// for both front ends; the engine checks them again in Submit), applied while parsing so that errors
// can quote the JSON value as sent, and OpenAI's default max_tokens.
struct CompletionLimits {
  engine::RequestLimits rules;
  int default_max_tokens = 16;
};

// The fields completions and chat completions share (model, n, sampling, stop rules, stream,
// stream_options) from a JSON object into `r`. InvalidArgument naming the field.
absl::Status ParseCommonFields(const nlohmann::json& body, const CompletionLimits& limits, CompletionRequest* r);

// Parses `body` (JSON). InvalidArgument naming the parameter for anything malformed or unsupported:
// bad JSON, a missing or empty prompt, a batch of prompts, n outside [1, kMaxChoices], echo with
// logprobs, stream_options without stream, best_of, suffix, a value of
// the wrong type or out of range (the sampler's own checks name the parameter too). Integer fields
// are range-checked before any narrowing and must be whole; token ids (prompt, stop_token_ids,
// logit_bias keys) must be in the rules' vocabulary; messages quote the value as sent.
absl::StatusOr<CompletionRequest> ParseCompletionRequest(const std::string& body, const engine::Tokenizer& tokenizer,
                                                         const CompletionLimits& limits);

}  // namespace mcserve::server
