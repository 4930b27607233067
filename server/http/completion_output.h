// CompletionOutput: one completion's engine events folded into what the client receives: for a
// stream, the server-sent events of each event as it comes (`data: {chunk}`, and `data: [DONE]` after
// the final one); otherwise the whole JSON response once the final event is in. No I/O; one thread
// at a time (the connection's strand).
#pragma once

#include <cstdint>
#include <string>

#include "engine/model/tokenizer.h"
#include "engine/serving/output_channel.h"
#include "server/http/openai_completion.h"
#include "server/http/responses.h"

namespace mcserve::server {

class CompletionOutput {
 public:
  // `result` carries id, model, created and prompt_tokens; `tokenizer` must outlive this.
  CompletionOutput(CompletionResult result, const engine::Tokenizer* tokenizer, bool logprobs, bool stream);

  // Folds `event` in; for a stream, appends the server-sent events it makes to `*sse` (nothing for an
  // event with nothing to show yet, such as held-back bytes of a character).
  void Add(const engine::OutputEvent& event, std::string* sse);

  // Whether the final event has been added.
  bool finished() const { return result_.finish != engine::FinishReason::kNone; }
  // Whether the client asked for server-sent events.
  bool stream() const { return stream_; }
  // The final event's reason (kNone until finished).
  engine::FinishReason finish() const { return result_.finish; }
  // The prompt's length and the tokens generated so far, for accounting.
  int64_t prompt_tokens() const { return result_.prompt_tokens; }
  int64_t generated_tokens() const { return static_cast<int64_t>(result_.token_ids.size()); }
  // The non-streamed response once finished: 200 with the completion, or 500 with the engine's error.
  Response Finished() const;

 private:
  CompletionResult result_;
  const engine::Tokenizer* tokenizer_;
  const bool logprobs_;
  const bool stream_;
  std::string error_;  // the engine's message when the request failed (kError)
};

}  // namespace mcserve::server
