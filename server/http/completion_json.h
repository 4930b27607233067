// The JSON of OpenAI-compatible responses: a finished completion or chat completion (every choice and
// the usage), one streamed chunk of a choice, the usage-only chunk of stream_options.include_usage,
// and the error body. Pure functions; any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/model/tokenizer.h"
#include "engine/serving/output_channel.h"

namespace mcserve::server {

// What one choice has produced so far.
struct ChoiceResult {
  std::string text;
  std::vector<int32_t> token_ids;
  std::vector<engine::OutputEvent> logprob_events;  // events with logprobs (when requested)
  engine::FinishReason finish = engine::FinishReason::kNone;
};

// What a finished (or finishing) completion has produced so far.
struct CompletionResult {
  std::string id;            // "cmpl-<n>" or "chatcmpl-<n>"
  std::string model;
  int64_t created = 0;       // unix seconds
  bool chat = false;         // chat completion shapes (message / delta) rather than text
  std::string echo_text;     // completions' echo: the prompt's text, before every choice's text
  std::vector<ChoiceResult> choices;  // [n]
  int64_t prompt_tokens = 0, cached_tokens = 0;
  // Tokens generated over every choice.
  int64_t completion_tokens() const;
};

// The non-streaming response body.
std::string CompletionJson(const CompletionResult& r, const engine::Tokenizer& tokenizer, bool logprobs);
// A streamed chunk opening choice `index` (a chat choice's assistant role; completions' echoed prompt).
std::string StartChunkJson(const CompletionResult& r, int index);
// One streamed chunk of choice `index`: the text delta of `event`, and on its final event the finish
// reason; `usage` adds the usage so far (the last chunk without stream_options.include_usage).
std::string ChunkJson(const CompletionResult& r, int index, const engine::OutputEvent& event,
                      const engine::Tokenizer& tokenizer, bool logprobs, bool usage);
// The chunk stream_options.include_usage asks for after the last choice: no choices, the usage.
std::string UsageChunkJson(const CompletionResult& r);
// An OpenAI-style error body {"error": {"message", "type", "param", "code"}}.
std::string ErrorJson(const std::string& message, const std::string& type, int code);
// "stop" / "length" / "abort" / "error" as OpenAI clients expect; null-equivalent "" for kNone.
const char* OpenAiFinishReason(engine::FinishReason r);

}  // namespace mcserve::server
