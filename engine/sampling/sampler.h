// Sampler: turns one row of logits into a token (greedy at temperature 0; otherwise temperature,
// top-k, top-p). A seed makes the sequence of draws reproducible. One instance per request;
// not thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <span>

#include "absl/status/statusor.h"

namespace mcserve::engine {

struct SamplingParams {
  float temperature = 1.0f;  // 0 = greedy
  float top_p = 1.0f;        // nucleus mass kept, in (0, 1]
  int top_k = 0;             // 0 = all tokens
  std::optional<uint64_t> seed;
};

class Sampler {
 public:
  // InvalidArgument names the bad parameter (negative temperature, top_p outside (0, 1], top_k < 0).
  static absl::StatusOr<Sampler> Create(const SamplingParams& params);

  // Picks a token from logits [vocab]. Ties in greedy mode go to the lowest id.
  int32_t Sample(std::span<const float> logits);

 private:
  explicit Sampler(const SamplingParams& params);
  SamplingParams params_;
  std::mt19937_64 rng_;
};

}  // namespace mcserve::engine
