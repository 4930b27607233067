// Sampler: turns one row of logits into a token with vLLM's semantics for every parameter. Order:
// logit bias → banned ids (−inf) → repetition / presence / frequency penalties → temperature
// (0 = greedy) → top-k → top-p → min-p → a draw from std::mt19937_64 (seeded when `seed` is set).
// One instance per request; not thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"

namespace mcserve::engine {

// Per-request sampling parameters (same meaning as vLLM's SamplingParams fields of that name).
struct SamplingParams {
  float temperature = 1.0f;          // 0 = greedy
  float top_p = 1.0f;                // nucleus mass kept, in (0, 1]
  int top_k = 0;                     // 0 = all tokens (-1 also accepted as "all", like vLLM)
  float min_p = 0.0f;                // drop tokens with p < min_p · p_max, in [0, 1]
  float repetition_penalty = 1.0f;   // > 0; tokens seen in prompt or output: logit/ρ if > 0 else logit·ρ
  float presence_penalty = 0.0f;     // [-2, 2]: subtracted once from tokens present in the output
  float frequency_penalty = 0.0f;    // [-2, 2]: subtracted per occurrence in the output
  std::vector<std::pair<int32_t, float>> logit_bias;  // added to the logits first
  std::optional<uint64_t> seed;      // reproducible draws
  int logprobs = 0;                  // top-n logprobs to report per token, 0..20 (0: no log-softmax at all)
};

// One id with its log-probability.
struct TokenLogprob {
  int32_t id = 0;
  float logprob = 0.0f;
};

// The sampled token and, when requested, the most likely alternatives.
struct SampledToken {
  int32_t id = 0;
  // Of `id` under the model's raw distribution (log-softmax of the logits, as vLLM's default); only
  // computed when logprobs > 0 (the front ends report none otherwise), else 0.
  float logprob = 0.0f;
  std::vector<TokenLogprob> top;     // the `logprobs` most likely ids, descending (empty when logprobs = 0)
};

class Sampler {
 public:
  // InvalidArgument naming the bad parameter; logit_bias ids must be in [0, vocab_size). Only ids
  // below vocab_size (the tokenizer's) are ever picked or listed as alternatives; the logits may have
  // more rows (a model's vocabulary padded past the tokenizer's), which still count in the logprobs.
  static absl::StatusOr<Sampler> Create(const SamplingParams& params, int vocab_size);
  // The prompt's ids (repetition penalty counts them, as vLLM does). Call once before sampling.
  void SetPrompt(std::span<const int32_t> prompt);
  // Picks a token from logits [rows ≥ 1] among ids below min(rows, vocab_size); `banned` ids can't be
  // picked (min_tokens suppressing EOS / stop ids). Records the token as output (for the penalties).
  // NaN logits count as −inf; if no token is left at all, the lowest id that is not banned. Cost
  // O(vocab) per call plus O(nucleus log nucleus) for top-p; no full sort.
  SampledToken Sample(std::span<const float> logits, std::span<const int32_t> banned = {});

 private:
  Sampler(const SamplingParams& params, int vocab_size);
  // Applies bias, bans and penalties to work_ [vocab] (a copy of the logits).
  void ApplyAdjustments(std::span<const int32_t> banned);
  // Temperature, top-k, top-p, min-p and the draw on work_; −1 if every token is −inf.
  int32_t Draw();
  // Keeps the top-p nucleus of cands_ (mass `total` over all tokens), in no particular order.
  void KeepNucleus(double total);

  struct Candidate {
    double weight;  // exp(logit/T − max), unnormalised
    int32_t id;
  };

  SamplingParams params_;
  int vocab_size_;
  std::mt19937_64 rng_;
  absl::flat_hash_set<int32_t> prompt_ids_;              // distinct prompt ids (repetition penalty)
  absl::flat_hash_map<int32_t, int32_t> output_counts_;  // id → occurrences in the output
  std::vector<float> work_;                              // [vocab] adjusted logits, reused per step
  std::vector<float> weights_;                           // [vocab] exp(work_ − max), reused per step
  std::vector<float> scratch_;                           // top-k selection, reused per step
  std::vector<Candidate> cands_;                         // tokens still in the running, reused
};

}  // namespace mcserve::engine
