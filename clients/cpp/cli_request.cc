#include "clients/cpp/cli_request.h"

#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace mcserve::client {
namespace {

// `value` of --`flag` as a uint32 proto field.
absl::StatusOr<uint32_t> Uint32Flag(const char* flag, int64_t value) {
  if (value < 0 || value > std::numeric_limits<uint32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, ": must be in [0, ",
                                                   std::numeric_limits<uint32_t>::max(), "], got ", value));
  }
  return static_cast<uint32_t>(value);
}

absl::StatusOr<int32_t> Int32Item(const char* flag, const std::string& item) {
  int32_t id = 0;
  if (!absl::SimpleAtoi(item, &id)) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, ": \"", item, "\" is not a 32-bit integer"));
  }
  return id;
}

absl::Status AddLogitBias(const std::vector<std::string>& items, v1::SamplingParams* sampling) {
  for (const std::string& item : items) {
    std::vector<std::string> parts = absl::StrSplit(item, ':');
    int32_t id = 0;
    float bias = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &id) || !absl::SimpleAtof(parts[1], &bias)) {
      return absl::InvalidArgumentError(absl::StrCat("--logit_bias: \"", item, "\" is not TOKEN_ID:BIAS"));
    }
    (*sampling->mutable_logit_bias())[id] = bias;
  }
  return absl::OkStatus();
}

absl::Status FillPrompt(const GenerateFlags& flags, const std::string& prompt, v1::GenerateRequest* request) {
  if (!prompt.empty() && !flags.token_ids.empty()) {
    return absl::InvalidArgumentError("prompt: give PROMPT text or --token_ids, not both");
  }
  if (prompt.empty() && flags.token_ids.empty()) {
    return absl::InvalidArgumentError("prompt: give PROMPT text or --token_ids");
  }
  if (!prompt.empty()) {
    request->set_text(prompt);
    return absl::OkStatus();
  }
  v1::TokenIds* ids = request->mutable_token_ids();
  for (const std::string& item : flags.token_ids) {
    absl::StatusOr<int32_t> id = Int32Item("token_ids", item);
    if (!id.ok()) return id.status();
    ids->add_ids(*id);
  }
  return absl::OkStatus();
}

absl::Status FillSampling(const GenerateFlags& flags, v1::SamplingParams* sampling) {
  if (flags.temperature.has_value()) sampling->set_temperature(static_cast<float>(*flags.temperature));
  if (flags.top_p.has_value()) sampling->set_top_p(static_cast<float>(*flags.top_p));
  if (flags.top_k < std::numeric_limits<int32_t>::min() || flags.top_k > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("--top_k: ", flags.top_k, " is not a 32-bit integer"));
  }
  sampling->set_top_k(static_cast<int32_t>(flags.top_k));
  sampling->set_min_p(static_cast<float>(flags.min_p));
  if (flags.repetition_penalty.has_value()) {
    sampling->set_repetition_penalty(static_cast<float>(*flags.repetition_penalty));
  }
  sampling->set_presence_penalty(static_cast<float>(flags.presence_penalty));
  sampling->set_frequency_penalty(static_cast<float>(flags.frequency_penalty));
  if (flags.seed.has_value()) sampling->set_seed(*flags.seed);
  return AddLogitBias(flags.logit_bias, sampling);
}

absl::Status FillStop(const GenerateFlags& flags, v1::StopParams* stop) {
  if (flags.max_tokens.has_value()) {
    absl::StatusOr<uint32_t> max_tokens = Uint32Flag("max_tokens", *flags.max_tokens);
    if (!max_tokens.ok()) return max_tokens.status();
    stop->set_max_tokens(*max_tokens);
  }
  absl::StatusOr<uint32_t> min_tokens = Uint32Flag("min_tokens", flags.min_tokens);
  if (!min_tokens.ok()) return min_tokens.status();
  stop->set_min_tokens(*min_tokens);
  for (const std::string& item : flags.stop_token_ids) {
    absl::StatusOr<int32_t> id = Int32Item("stop_token_ids", item);
    if (!id.ok()) return id.status();
    stop->add_stop_token_ids(*id);
  }
  for (const std::string& s : flags.stop) stop->add_stop(s);
  stop->set_ignore_eos(flags.ignore_eos);
  stop->set_include_stop_str_in_output(flags.include_stop_str_in_output);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::GenerateRequest> BuildGenerateRequest(const GenerateFlags& flags, const std::string& prompt) {
  v1::GenerateRequest request;
  request.set_request_id(flags.request_id);
  if (absl::Status s = FillPrompt(flags, prompt, &request); !s.ok()) return s;
  if (absl::Status s = FillSampling(flags, request.mutable_sampling()); !s.ok()) return s;
  if (absl::Status s = FillStop(flags, request.mutable_stop()); !s.ok()) return s;
  absl::StatusOr<uint32_t> logprobs = Uint32Flag("logprobs", flags.logprobs);
  if (!logprobs.ok()) return logprobs.status();
  request.set_logprobs(*logprobs);
  return request;
}

}  // namespace mcserve::client
