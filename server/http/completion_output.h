// CompletionOutput: one completion's engine events (for each of its n choices) folded into what the
// client receives: for a stream, the server-sent events of each event as it comes (`data: {chunk}`;
// with stream_options.include_usage a usage chunk once every choice has finished; `data: [DONE]`
// last); otherwise the whole JSON response once every choice's final event is in. No I/O; one
// thread at a time (the connection's strand).
#pragma once

#include <cstdint>
#include <string>

#include "engine/model/tokenizer.h"
#include "engine/serving/output_channel.h"
#include "server/http/completion_json.h"
#include "server/http/responses.h"

namespace mcserve::server {

// How a completion is answered.
struct OutputOptions {
  bool logprobs = false;       // completions' logprobs object on each choice / chunk
  bool stream = false;         // server-sent events
  bool include_usage = false;  // stream_options.include_usage
};

class CompletionOutput {
 public:
  // `result` carries id, model, created, prompt_tokens, chat, echo_text and one (empty) choice per
  // sample; `tokenizer` must outlive this.
  CompletionOutput(CompletionResult result, const engine::Tokenizer* tokenizer, OutputOptions options);

  // For a stream, the events that open every choice (a chat choice's role, the echoed prompt);
  // "" when none.
  std::string Start() const;
  // Folds choice `index`'s `event` in; for a stream, appends the server-sent events it makes to
  // `*sse` (nothing for an event with nothing to show yet, such as held-back bytes of a character).
  void Add(int index, const engine::OutputEvent& event, std::string* sse);

  // Whether choice `index` / every choice has had its final event.
  bool finished(int index) const { return result_.choices[index].finish != engine::FinishReason::kNone; }
  bool finished() const { return unfinished_ == 0; }
  // Whether the client asked for server-sent events.
  bool stream() const { return options_.stream; }
  // The number of choices.
  int choices() const { return static_cast<int>(result_.choices.size()); }
  // kError if a choice failed, else the first choice's reason (kNone until finished).
  engine::FinishReason finish() const;
  // The prompt's length and the tokens generated so far (all choices), for accounting.
  int64_t prompt_tokens() const { return result_.prompt_tokens; }
  int64_t generated_tokens() const { return result_.completion_tokens(); }
  // The non-streamed response once finished: 200 with the completion, or 500 with the engine's error.
  Response Finished() const;

 private:
  CompletionResult result_;
  const engine::Tokenizer* tokenizer_;
  const OutputOptions options_;
  int unfinished_;
  std::string error_;  // the engine's message when a choice failed (kError)
};

}  // namespace mcserve::server
