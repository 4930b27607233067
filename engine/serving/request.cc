#include "engine/serving/request.h"

#include "absl/strings/str_cat.h"

namespace mcserve::engine {

absl::Status ValidatePrompt(std::span<const int32_t> prompt, int vocab_size, int64_t max_prompt_tokens) {
  if (prompt.empty()) return absl::InvalidArgumentError("prompt is empty: at least one token is needed");
  if (static_cast<int64_t>(prompt.size()) > max_prompt_tokens) {
    return absl::InvalidArgumentError(absl::StrCat("prompt has ", prompt.size(),
                                                   " tokens, more than max_prompt_tokens = ", max_prompt_tokens));
  }
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (prompt[i] < 0 || prompt[i] >= vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("prompt token ", i, " has id ", prompt[i],
                                                     ", outside the vocabulary [0, ", vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

OutputEvent FinalEvent(FinishReason reason, absl::Status error) {
  OutputEvent e;
  e.finish = reason;
  e.error = std::move(error);
  return e;
}

}  // namespace mcserve::engine
