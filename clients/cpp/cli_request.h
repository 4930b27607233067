// mcserve-cli's generation flags → a mcserve.v1.GenerateRequest.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "mcserve/v1/generation.pb.h"

namespace mcserve::client {

// The values of the generation flags (each named like its proto field). Unset optionals leave the
// proto field unset, so the server's defaults (vLLM's) apply.
struct GenerateFlags {
  std::string request_id;
  std::vector<std::string> token_ids;  // the prompt as token ids instead of text
  // SamplingParams
  std::optional<double> temperature;
  std::optional<double> top_p;
  int64_t top_k = 0;
  double min_p = 0;
  std::optional<double> repetition_penalty;
  double presence_penalty = 0;
  double frequency_penalty = 0;
  std::vector<std::string> logit_bias;  // "ID:BIAS" each
  std::optional<uint64_t> seed;
  // StopParams
  std::optional<int64_t> max_tokens;
  int64_t min_tokens = 0;
  std::vector<std::string> stop_token_ids;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  bool include_stop_str_in_output = false;
  int64_t logprobs = 0;
};

// The request for `prompt` (text; "" when the prompt is --token_ids). INVALID_ARGUMENT naming the
// flag for values that do not fit the proto (a negative count, "ID:BIAS" malformed, ...) or when
// neither or both of the text and --token_ids are given. The server checks the rest.
absl::StatusOr<v1::GenerateRequest> BuildGenerateRequest(const GenerateFlags& flags, const std::string& prompt);

}  // namespace mcserve::client
