// The passkey retrieval test through the engine (mcserve-eval passkey): `trials` prompts of
// `length` tokens (passkey_prompt.h), each with a different 5-digit key and filler offset drawn
// from a seeded generator, greedily decoded from a fresh state and scored by
// PasskeyAnswerIsCorrect. Each prompt is one greedy engine request. Caller's thread; one call at a
// time per engine.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/tokenizer.h"
#include "engine/serving/engine.h"
#include "tools/eval/passkey_prompt.h"

namespace mcserve::tools {

struct PasskeyOptions {
  int64_t length = 1024;     // prompt tokens, BOS included
  double depth = 0.5;        // where the needle goes in the filler, in [0, 1]
  int trials = 10;           // prompts, >= 1
  uint64_t seed = 1;         // keys and filler offsets
  int answer_tokens = 8;     // greedy tokens generated per prompt (stops early at EOS), >= 1
  int chunk = 256;           // prompt tokens per forward step, >= 1: the engine's max_batch_tokens (reported)
  PasskeyTemplate prompt_template = kStandardPasskeyTemplate;
};

struct PasskeyTrial {
  std::string key;
  int64_t filler_start = 0;     // haystack token the filler starts at
  int64_t filler_tokens = 0;    // filler in the prompt (the key's digits may take more or fewer tokens)
  int64_t needle_position = 0;  // prompt token the needle starts at
  double depth = 0;             // needle depth actually used (a word start at or after the asked one)
  std::string generated;        // the decoded greedy continuation
  bool correct = false;
};

struct PasskeyResult {
  int64_t haystack_tokens = 0;
  std::vector<PasskeyTrial> trials;
  int correct = 0;
  double accuracy = 0;  // correct / trials
};

// Runs the trials through `engine` (one request each, from a fresh state; `tokenizer` is the
// engine's). `on_trial` (optional) is called after each trial. Bad options or too short a haystack
// → InvalidArgument.
absl::StatusOr<PasskeyResult> RunPasskey(engine::Engine& engine, const engine::Tokenizer& tokenizer,
                                         std::span<const int32_t> haystack, const PasskeyOptions& options,
                                         const std::function<void(const PasskeyTrial&)>& on_trial = nullptr);

}  // namespace mcserve::tools
