#include "server/http/completion_output.h"

#include "absl/strings/str_cat.h"

namespace mcserve::server {

CompletionOutput::CompletionOutput(CompletionResult result, const engine::Tokenizer* tokenizer, OutputOptions options)
    : result_(std::move(result)),
      tokenizer_(tokenizer),
      options_(options),
      unfinished_(static_cast<int>(result_.choices.size())) {}

std::string CompletionOutput::Start() const {
  std::string sse;
  if (!options_.stream || (!result_.chat && result_.echo_text.empty())) return sse;
  for (int i = 0; i < choices(); ++i) absl::StrAppend(&sse, "data: ", StartChunkJson(result_, i), "\n\n");
  return sse;
}

void CompletionOutput::Add(int index, const engine::OutputEvent& event, std::string* sse) {
  ChoiceResult& choice = result_.choices[index];
  choice.text += event.text;
  const bool has_token = event.token_id >= 0;
  if (has_token) {
    choice.token_ids.push_back(event.token_id);
    if (options_.logprobs && !options_.stream) choice.logprob_events.push_back(event);
  }
  if (event.cached_prompt_tokens >= 0 && index == 0) result_.cached_tokens = event.cached_prompt_tokens;
  if (event.is_final()) {
    choice.finish = event.finish;
    --unfinished_;
    if (event.finish == engine::FinishReason::kError) error_ = std::string(event.error.message());
  }
  if (!options_.stream || sse == nullptr) return;
  if (event.text.empty() && !event.is_final() && !(options_.logprobs && has_token)) return;
  // Without include_usage the last choice's final chunk carries the usage (mcserve's own extension).
  const bool usage_here = finished() && !options_.include_usage;
  absl::StrAppend(sse, "data: ", ChunkJson(result_, index, event, *tokenizer_, options_.logprobs, usage_here), "\n\n");
  if (!finished()) return;
  if (options_.include_usage) absl::StrAppend(sse, "data: ", UsageChunkJson(result_), "\n\n");
  absl::StrAppend(sse, "data: [DONE]\n\n");
}

engine::FinishReason CompletionOutput::finish() const {
  for (const ChoiceResult& c : result_.choices) {
    if (c.finish == engine::FinishReason::kError) return c.finish;
  }
  return result_.choices.empty() ? engine::FinishReason::kNone : result_.choices[0].finish;
}

Response CompletionOutput::Finished() const {
  if (finish() == engine::FinishReason::kError) return ErrorResponse(500, error_, "server_error");
  return Response{.status = 200,
                  .content_type = "application/json",
                  .body = CompletionJson(result_, *tokenizer_, options_.logprobs)};
}

}  // namespace mcserve::server
