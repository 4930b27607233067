// The rules every request is held to, whichever front end it came through: one set of limits
// (RequestLimits, made by the Engine from its options, model and tokenizer) and one check of a whole
// RequestSpec against them (CheckRequest, run by Engine::Submit). Front ends that report errors while
// parsing (the HTTP route names JSON values as sent) use the same limits. Any thread.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "engine/serving/request.h"

namespace mcserve::engine {

// What a request may ask for. Plain value.
struct RequestLimits {
  // Token ids a request may name (prompt, stop ids, logit_bias keys): [0, vocab_size), the ids known to
  // both the model and the tokenizer (a model may pad its embedding beyond the tokenizer's vocabulary).
  int32_t vocab_size = 0;
  int64_t max_prompt_tokens = 1 << 20;  // --max-prompt-tokens
  int32_t max_tokens_limit = 4096;      // largest max_tokens (and min_tokens): EngineOptions::max_tokens_limit
  int64_t max_positions = 0;            // the model's position limit for prompt + max_tokens (0: none)
  static constexpr int kMaxLogprobs = 20;  // top-n alternatives per token, as OpenAI's API
};

// OK, or InvalidArgument naming the field and the value for the first rule `spec` breaks: an empty
// prompt or one over max_prompt_tokens; a prompt id, stop id or logit_bias key outside
// [0, vocab_size); max_tokens outside [1, max_tokens_limit]; min_tokens outside [0, max_tokens_limit];
// logprobs outside [0, kMaxLogprobs]; prompt + max_tokens over max_positions (when set). Sampling values' own ranges are Sampler::Create's. Any thread.
absl::Status CheckRequest(const RequestSpec& spec, const RequestLimits& limits);

}  // namespace mcserve::engine
