// Single-request generation on one state slot: chunked prefill of the prompt, then one-token
// decode steps with a sampler. The serving scheduler batches many requests instead; this is what
// mcserve-run, the parity tests and the decode benchmark use. Caller's thread.
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/runner/model.h"
#include "engine/sampling/sampler.h"

namespace mcserve::engine {

struct GenerateOptions {
  int max_tokens = 64;
  int prefill_chunk = 256;  // prompt tokens per forward pass
  bool stop_at_eos = true;
  SamplingParams sampling;
};

// Logits [vocab] (host) of the last prompt token after prefilling `prompt` into `slot` in chunks
// of `chunk` tokens. The slot's state continues from wherever it was.
absl::StatusOr<std::vector<float>> Prefill(const Model& model, StatePool& pool, int slot,
                                           std::span<const int32_t> prompt, int chunk);

// Prefills `prompt` and samples up to max_tokens tokens, calling on_token for each as it is made
// (return false to stop). Returns the generated ids (EOS included when it stopped generation).
absl::StatusOr<std::vector<int32_t>> Generate(const Model& model, StatePool& pool, int slot,
                                              std::span<const int32_t> prompt, const GenerateOptions& options,
                                              const std::function<bool(int32_t)>& on_token = nullptr);

}  // namespace mcserve::engine
