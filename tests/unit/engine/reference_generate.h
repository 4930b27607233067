// Model-level generation for the parity tests: chunked prefill of a prompt on one slot, then
// one-token decode steps through Model::Forward directly, below the Engine (which is what serves
// and what mcserve-run / mcserve-eval drive). Test thread only.
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/runner/model.h"
#include "engine/sampling/sampler.h"
#include "tests/unit/engine/segmented_forward.h"

namespace mcserve::testing {

using engine::Model;
using engine::Sampler;
using engine::SamplingParams;
using engine::SequenceChunk;
using engine::StatePool;

struct GenerateOptions {
  int max_tokens = 64;
  int prefill_chunk = 256;  // prompt tokens per forward pass
  bool stop_at_eos = true;
  SamplingParams sampling;
};

// Prefill: logits [vocab] (host) of the last prompt token after running `prompt` into `slot` in
// chunks of `chunk` tokens. Generate: prefills and samples up to max_tokens tokens, calling
// on_token for each (false stops); returns the generated ids (EOS included when it stopped).


inline absl::StatusOr<std::vector<float>> Prefill(const Model& model, StatePool& pool, int slot,
                                           std::span<const int32_t> prompt, int chunk) {
  if (prompt.empty()) return absl::InvalidArgumentError("prompt is empty");
  if (chunk <= 0) return absl::InvalidArgumentError(absl::StrCat("prefill chunk must be positive, got ", chunk));
  std::vector<float> logits;
  for (size_t begin = 0; begin < prompt.size(); begin += chunk) {
    const size_t n = std::min<size_t>(chunk, prompt.size() - begin);
    const SequenceChunk c{.slot = slot, .tokens = prompt.subspan(begin, n)};
    MCSERVE_ASSIGN_OR_RETURN(std::vector<std::vector<float>> out, RunSegmented(model, pool, {&c, 1}));
    logits = std::move(out[0]);
  }
  return logits;
}

inline absl::StatusOr<std::vector<int32_t>> Generate(const Model& model, StatePool& pool, int slot,
                                              std::span<const int32_t> prompt, const GenerateOptions& options,
                                              const std::function<bool(int32_t)>& on_token = nullptr) {
  if (options.max_tokens < 0) {
    return absl::InvalidArgumentError(absl::StrCat("max_tokens must be >= 0, got ", options.max_tokens));
  }
  MCSERVE_ASSIGN_OR_RETURN(Sampler sampler,
                           Sampler::Create(options.sampling, static_cast<int>(model.config().vocab_size)));
  sampler.SetPrompt(prompt);
  MCSERVE_ASSIGN_OR_RETURN(std::vector<float> logits, Prefill(model, pool, slot, prompt, options.prefill_chunk));
  std::vector<int32_t> out;
  const int32_t eos = static_cast<int32_t>(model.config().eos_token_id);
  while (static_cast<int>(out.size()) < options.max_tokens) {
    const int32_t token = sampler.Sample(logits).id;
    out.push_back(token);
    if (on_token && !on_token(token)) break;
    if (options.stop_at_eos && token == eos) break;
    if (static_cast<int>(out.size()) == options.max_tokens) break;
    const SequenceChunk c{.slot = slot, .tokens = {&out.back(), 1}, .learn = false};  // sampled: never trains
    MCSERVE_ASSIGN_OR_RETURN(std::vector<std::vector<float>> next, RunSegmented(model, pool, {&c, 1}));
    logits = std::move(next[0]);
  }
  return out;
}

}  // namespace mcserve::testing
