#include "tools/eval/passkey.h"

#include <random>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tools/eval/engine_request.h"
#include "tools/eval/passkey_score.h"

namespace mcserve::tools {
namespace {

absl::Status CheckOptions(const PasskeyOptions& options) {
  if (!(options.depth >= 0 && options.depth <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("depth must be in [0, 1], got ", options.depth));
  }
  if (options.trials < 1) return absl::InvalidArgumentError(absl::StrCat("trials must be positive, got ", options.trials));
  if (options.answer_tokens < 1) {
    return absl::InvalidArgumentError(absl::StrCat("answer tokens must be positive, got ", options.answer_tokens));
  }
  if (options.chunk < 1) return absl::InvalidArgumentError(absl::StrCat("chunk must be positive, got ", options.chunk));
  return absl::OkStatus();
}

// A 5-digit key; the generator's raw output (not a std distribution) keeps it the same on every
// standard library.
std::string DrawKey(std::mt19937_64& rng) { return std::to_string(10000 + rng() % 90000); }

// A word-initial haystack token at or after a random offset such that `filler` tokens follow it
// (searching backwards when none lies after).
int64_t DrawFillerStart(const engine::Tokenizer& tokenizer, std::span<const int32_t> haystack, int64_t filler,
                        std::mt19937_64& rng) {
  const int64_t last = static_cast<int64_t>(haystack.size()) - filler;
  const int64_t drawn = static_cast<int64_t>(rng() % static_cast<uint64_t>(last + 1));
  for (int64_t s = drawn; s <= last; ++s) {
    if (StartsWord(tokenizer, haystack, s)) return s;
  }
  for (int64_t s = drawn - 1; s > 0; --s) {
    if (StartsWord(tokenizer, haystack, s)) return s;
  }
  return 0;
}

// Greedy answer of `prompt` (one engine request, from a fresh state), decoded (EOS dropped).
absl::StatusOr<std::string> GreedyAnswer(engine::Engine& engine, const engine::Tokenizer& tokenizer,
                                         std::vector<int32_t> prompt, const PasskeyOptions& options) {
  engine::RequestSpec spec;
  spec.prompt = std::move(prompt);
  spec.sampling.temperature = 0;
  spec.stop.max_tokens = options.answer_tokens;
  spec.stop.ignore_eos = false;  // EOS ends the answer
  MCSERVE_ASSIGN_OR_RETURN(Completion c, Complete(engine, std::move(spec)));
  if (!c.tokens.empty() && c.tokens.back() == tokenizer.eos_id()) c.tokens.pop_back();
  return tokenizer.Decode(c.tokens);
}

}  // namespace

absl::StatusOr<PasskeyResult> RunPasskey(engine::Engine& engine, const engine::Tokenizer& tokenizer,
                                         std::span<const int32_t> haystack, const PasskeyOptions& options,
                                         const std::function<void(const PasskeyTrial&)>& on_trial) {
  MCSERVE_RETURN_IF_ERROR(CheckOptions(options));
  PasskeyResult result;
  result.haystack_tokens = static_cast<int64_t>(haystack.size());
  std::mt19937_64 rng(options.seed);
  for (int i = 0; i < options.trials; ++i) {
    PasskeyTrial trial;
    trial.key = DrawKey(rng);
    MCSERVE_ASSIGN_OR_RETURN(const int64_t fixed, PasskeyTemplateTokens(tokenizer, options.prompt_template, trial.key));
    const int64_t filler = options.length - fixed;
    if (filler >= 0 && filler <= result.haystack_tokens) {
      trial.filler_start = DrawFillerStart(tokenizer, haystack, filler, rng);
    }
    MCSERVE_ASSIGN_OR_RETURN(PasskeyPrompt prompt, BuildPasskeyPrompt(tokenizer, options.prompt_template, haystack,
                                                                      trial.filler_start, options.length,
                                                                      options.depth, trial.key));
    trial.filler_tokens = prompt.filler_tokens;
    trial.needle_position = prompt.needle_position;
    trial.depth = prompt.depth;
    MCSERVE_ASSIGN_OR_RETURN(trial.generated, GreedyAnswer(engine, tokenizer, prompt.ids, options));
    trial.correct = PasskeyAnswerIsCorrect(trial.generated, trial.key);
    result.correct += trial.correct ? 1 : 0;
    if (on_trial) on_trial(trial);
    result.trials.push_back(std::move(trial));
  }
  result.accuracy = static_cast<double>(result.correct) / static_cast<double>(result.trials.size());
  return result;
}

}  // namespace mcserve::tools
