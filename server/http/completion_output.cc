#include "server/http/completion_output.h"

#include "absl/strings/str_cat.h"

namespace mcserve::server {

CompletionOutput::CompletionOutput(CompletionResult result, const engine::Tokenizer* tokenizer, bool logprobs,
                                   bool stream)
    : result_(std::move(result)), tokenizer_(tokenizer), logprobs_(logprobs), stream_(stream) {}

void CompletionOutput::Add(const engine::OutputEvent& event, std::string* sse) {
  result_.text += event.text;
  const bool has_token = event.token_id >= 0;
  if (has_token) {
    result_.token_ids.push_back(event.token_id);
    if (logprobs_ && !stream_) result_.logprob_events.push_back(event);
  }
  if (event.cached_prompt_tokens >= 0) result_.cached_tokens = event.cached_prompt_tokens;
  if (event.is_final()) {
    result_.finish = event.finish;
    if (event.finish == engine::FinishReason::kError) error_ = std::string(event.error.message());
  }
  if (!stream_ || sse == nullptr) return;
  if (event.text.empty() && !event.is_final() && !(logprobs_ && has_token)) return;
  absl::StrAppend(sse, "data: ", CompletionChunkJson(result_, event, *tokenizer_, logprobs_), "\n\n");
  if (event.is_final()) absl::StrAppend(sse, "data: [DONE]\n\n");
}

Response CompletionOutput::Finished() const {
  if (result_.finish == engine::FinishReason::kError) return ErrorResponse(500, error_, "server_error");
  return Response{
      .status = 200, .content_type = "application/json", .body = CompletionJson(result_, *tokenizer_, logprobs_)};
}

}  // namespace mcserve::server
