// The OpenAI-compatible `/v1/completions` request and response bodies: parsing a JSON request into
// the engine's RequestSpec (every parameter vLLM's completions route takes that the engine supports;
// the rest named in an error), and writing the JSON of a finished completion or of one streamed
// chunk. Pure functions; any thread.
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

namespace mcserve::server {

// A parsed completions request.
struct CompletionRequest {
  engine::RequestSpec spec;  // prompt ids, sampling and stop rules
  bool stream = false;
  std::string model;         // as given ("" when absent)
};

// What a completions request is held to: the engine's request rules (Engine::limits(), the same
// for both front ends; the engine checks them again in Submit), applied while parsing so that errors
// can quote the JSON value as sent, and OpenAI's default max_tokens.
struct CompletionLimits {
  engine::RequestLimits rules;
  int default_max_tokens = 16;
};

// Parses `body` (JSON). InvalidArgument naming the parameter for anything malformed or unsupported:
// bad JSON, a missing or empty prompt, a batch of prompts, n ≠ 1, echo, best_of, suffix, a value of
// the wrong type or out of range (the sampler's own checks name the parameter too). Integer fields
// are range-checked before any narrowing and must be whole; token ids (prompt, stop_token_ids,
// logit_bias keys) must be in the rules' vocabulary; messages quote the value as sent.
absl::StatusOr<CompletionRequest> ParseCompletionRequest(const std::string& body, const engine::Tokenizer& tokenizer,
                                                         const CompletionLimits& limits);

// What a finished (or finishing) completion has produced so far.
struct CompletionResult {
  std::string id;            // "cmpl-<n>"
  std::string model;
  int64_t created = 0;       // unix seconds
  std::string text;
  std::vector<int32_t> token_ids;
  std::vector<engine::OutputEvent> logprob_events;  // events with logprobs (when requested)
  engine::FinishReason finish = engine::FinishReason::kNone;
  int64_t prompt_tokens = 0, cached_tokens = 0;
};

// The non-streaming response body.
std::string CompletionJson(const CompletionResult& r, const engine::Tokenizer& tokenizer, bool logprobs);
// One streamed chunk (a `data:` line's JSON): the text delta of `event`, and on the final event the
// finish reason and usage.
std::string CompletionChunkJson(const CompletionResult& r, const engine::OutputEvent& event,
                                const engine::Tokenizer& tokenizer, bool logprobs);
// An OpenAI-style error body {"error": {"message", "type", "param", "code"}}.
std::string ErrorJson(const std::string& message, const std::string& type, int code);
// "stop" / "length" / "abort" / "error" as OpenAI clients expect; null-equivalent "" for kNone.
const char* OpenAiFinishReason(engine::FinishReason r);

}  // namespace mcserve::server
