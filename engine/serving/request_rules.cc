#include "engine/serving/request_rules.h"

#include <span>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace mcserve::engine {
namespace {

absl::Status Outside(const char* field, int64_t value, int64_t lo, int64_t hi) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", value, " is outside [", lo, ", ", hi, "]"));
}

absl::Status CheckPrompt(std::span<const int32_t> prompt, const RequestLimits& limits) {
  if (prompt.empty()) return absl::InvalidArgumentError("prompt is empty: at least one token is needed");
  if (static_cast<int64_t>(prompt.size()) > limits.max_prompt_tokens) {
    return absl::InvalidArgumentError(absl::StrCat("prompt has ", prompt.size(),
                                                   " tokens, more than max_prompt_tokens = ", limits.max_prompt_tokens));
  }
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (prompt[i] < 0 || prompt[i] >= limits.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("prompt token ", i, " has id ", prompt[i],
                                                     ", outside the vocabulary [0, ", limits.vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckStop(const StopCriteria& stop, const RequestLimits& limits) {
  if (stop.max_tokens < 1 || stop.max_tokens > limits.max_tokens_limit) {
    return Outside("max_tokens", stop.max_tokens, 1, limits.max_tokens_limit);
  }
  if (stop.min_tokens < 0 || stop.min_tokens > limits.max_tokens_limit) {
    return Outside("min_tokens", stop.min_tokens, 0, limits.max_tokens_limit);
  }
  for (size_t i = 0; i < stop.stop_token_ids.size(); ++i) {
    const int32_t id = stop.stop_token_ids[i];
    if (id < 0 || id >= limits.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("stop_token_ids[", i, "]: ", id,
                                                     " is outside the vocabulary [0, ", limits.vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckSampling(const SamplingParams& sampling, const RequestLimits& limits) {
  if (sampling.logprobs < 0 || sampling.logprobs > RequestLimits::kMaxLogprobs) {
    return Outside("logprobs", sampling.logprobs, 0, RequestLimits::kMaxLogprobs);
  }
  for (const auto& [id, bias] : sampling.logit_bias) {
    if (id < 0 || id >= limits.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("logit_bias: token id ", id, " is outside the vocabulary [0, ",
                                                     limits.vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

// prompt + max_tokens must fit the model's learned positions (gam's block_size).
absl::Status CheckPositions(const RequestSpec& spec, const RequestLimits& limits) {
  const int64_t total = static_cast<int64_t>(spec.prompt.size()) + spec.stop.max_tokens;
  if (limits.max_positions <= 0 || total <= limits.max_positions) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "prompt (", spec.prompt.size(), " tokens) + max_tokens (", spec.stop.max_tokens, ") = ", total,
      " is more than the model's position limit block_size = ", limits.max_positions, " tokens"));
}

}  // namespace

absl::Status CheckRequest(const RequestSpec& spec, const RequestLimits& limits) {
  MCSERVE_RETURN_IF_ERROR(CheckPrompt(spec.prompt, limits));
  MCSERVE_RETURN_IF_ERROR(CheckStop(spec.stop, limits));
  MCSERVE_RETURN_IF_ERROR(CheckPositions(spec, limits));
  return CheckSampling(spec.sampling, limits);
}

}  // namespace mcserve::engine
