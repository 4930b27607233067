// FakeModelRunner: a deterministic ModelRunner for engine tests. Each slot's logits depend only
// on the tokens that slot has run (FakeLogitRule, fake_logit_rule.h), so a sequence's output does
// not depend on what else shares its batches. Every Step's batch is recorded; Begin's results
// (cached prefix, RESOURCE_EXHAUSTED a number of times) and Step failures are configurable. With
// Options::segment > 0 it has armt's segments: a content chunk must fit in its slot's open segment
// and a full segment must be closed by a close chunk first (each breach counts as a violation);
// closes do not change the logits. Thread-safe (one mutex) so tests may inspect it while the engine
// loop runs.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/serving/model_runner.h"
#include "engine/serving/prompt_logprobs.h"
#include "tests/unit/engine/fake_logit_rule.h"
#include "tests/unit/engine/step_gate.h"

namespace mcserve::engine::testing {

class FakeModelRunner : public ModelRunner {
 public:
  // One sequence of a recorded step.
  struct Seq {
    int slot;
    int64_t start;                // tokens the slot had run before this step
    std::vector<int32_t> tokens;  // [n]
    int64_t prompt_size;          // of the slot's sequence: start < prompt_size means prefill
    bool close = false;           // a segment close (no tokens)
    bool prefill() const { return start < prompt_size; }
  };
  struct Options {
    int num_slots = 4;
    int vocab = 1000;
    int64_t boundary = 0;
    int64_t segment = 0;       // content tokens per segment (0: no segments, never a close)
    int64_t close_tokens = 0;  // what a close costs (armt's M)
    // Tokens the fake never picks as the arg-max (e.g. EOS, so tests control stopping).
    std::set<int32_t> never_pick;
  };

  explicit FakeModelRunner(Options options)
      : options_(options), rule_{.vocab = options.vocab, .never_pick = std::move(options.never_pick)} {}

  int num_slots() const override { return options_.num_slots; }
  int vocab_size() const override { return options_.vocab; }
  int64_t boundary_tokens() const override { return options_.boundary; }

  int num_free_slots() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return options_.num_slots - static_cast<int>(active_.size());
  }
  int64_t position(int slot) const override { return history_size(slot); }
  int64_t SegmentTokensLeft(int slot) const override {
    if (options_.segment == 0) return std::numeric_limits<int64_t>::max();
    std::lock_guard<std::mutex> lock(mu_);
    return options_.segment - OpenLength(slot);
  }
  int64_t close_tokens() const override { return options_.close_tokens; }

  // Takes the lowest free slot, like StatePool::Acquire.
  absl::StatusOr<BeginResult> Begin(std::span<const int32_t> prompt) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++begin_calls_;
    int slot = 0;
    while (slot < options_.num_slots && active_.count(slot)) ++slot;
    if (slot == options_.num_slots) {
      ++violations_;  // the engine asks only when num_free_slots() > 0
      return absl::ResourceExhaustedError("fake: every slot is busy");
    }
    if (!prompt.empty() && prompt[0] == fail_begin_token_) {
      return absl::InvalidArgumentError("fake: Begin refuses this prompt");
    }
    if (exhausted_left_ > 0) {
      --exhausted_left_;
      return absl::ResourceExhaustedError("fake: checkpoint store full");
    }
    int64_t cached = 0;
    if (cached_for_ && prompt.size() > 1) {
      cached = std::clamp<int64_t>(cached_for_(prompt), 0, static_cast<int64_t>(prompt.size()) - 1);
    }
    active_.insert(slot);
    begun_.push_back(std::vector<int32_t>(prompt.begin(), prompt.end()));
    history_[slot].assign(prompt.begin(), prompt.begin() + cached);
    closed_[slot] = options_.segment > 0 ? cached / options_.segment : 0;  // resumed right after a close
    begun_prompt_size_[slot] = static_cast<int64_t>(prompt.size());
    return BeginResult{.slot = slot, .cached_tokens = cached};
  }

  absl::StatusOr<StepOutput> Step(std::span<const SequenceChunk> batch) override {
    gate_.Enter();  // a test can hold the engine loop inside a chosen step
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<Seq> record;
    std::set<int> seen;
    for (const SequenceChunk& s : batch) {
      if (!active_.count(s.slot) || !seen.insert(s.slot).second || s.tokens.empty() != s.close_segment) ++violations_;
      const int64_t open = OpenLength(s.slot), n = static_cast<int64_t>(s.tokens.size());
      if (s.close_segment && (options_.segment == 0 || open != options_.segment)) ++violations_;
      if (!s.close_segment && options_.segment > 0 && open + n > options_.segment) ++violations_;
      // Prompt tokens are user-provided (learn), a decode's sampled token never is.
      const bool in_prompt = static_cast<int64_t>(history_[s.slot].size()) < begun_prompt_size_[s.slot];
      if (!s.close_segment && s.learn != in_prompt) ++violations_;
      record.push_back({s.slot, static_cast<int64_t>(history_[s.slot].size()),
                        std::vector<int32_t>(s.tokens.begin(), s.tokens.end()), begun_prompt_size_[s.slot],
                        s.close_segment});
    }
    // Every begun sequence past its prompt must decode in every step (when its channel has room).
    for (int slot : active_) {
      if (static_cast<int64_t>(history_[slot].size()) >= begun_prompt_size_[slot] && !seen.count(slot)) {
        ++decode_missing_;
      }
    }
    steps_.push_back(record);
    for (const SequenceChunk& s : batch) {
      for (int32_t t : s.tokens) {
        if (poison_token_ >= 0 && t == poison_token_) {
          // A failed step leaves the state undefined; the engine loop must end these sequences.
          return absl::InternalError("fake: poisoned token in batch");
        }
      }
    }
    StepOutput out;
    out.logits.resize(batch.size() * options_.vocab);
    out.prompt_logprobs.resize(batch.size());
    for (size_t i = 0; i < batch.size(); ++i) {
      if (batch[i].close_segment) {  // no tokens, a zero logits row
        ++closed_[batch[i].slot];
        continue;
      }
      std::vector<int32_t>& h = history_[batch[i].slot];
      const int64_t prompt_size = begun_prompt_size_[batch[i].slot];
      for (size_t j = 0; batch[i].all_logits && j + 1 < batch[i].tokens.size(); ++j) {
        // The row after tokens[j] scores tokens[j + 1].
        h.push_back(batch[i].tokens[j]);
        std::vector<float> row(options_.vocab);
        rule_.Fill(h, prompt_size, row);
        out.prompt_logprobs[i].push_back(TokenLogProb(row, batch[i].tokens[j + 1]));
      }
      if (batch[i].all_logits) h.resize(h.size() - (batch[i].tokens.size() - 1));
      h.insert(h.end(), batch[i].tokens.begin(), batch[i].tokens.end());
      rule_.Fill(h, prompt_size, std::span<float>(out.logits.data() + i * options_.vocab, options_.vocab));
      if (auto it = non_finite_.find(h.back()); it != non_finite_.end()) {
        out.logits[i * options_.vocab + it->second.first] = it->second.second;
      }
    }
    return out;
  }

  void End(int slot) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++end_calls_[slot];
    if (!active_.erase(slot)) ++violations_;
  }

  RunnerStats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    RunnerStats s;
    s.referenced_pages = static_cast<int64_t>(active_.size());
    s.prefix_hits = begin_calls_;
    return s;
  }

  // The arg-max token after `history` of a sequence with a `prompt_size`-token prompt (what a
  // greedy sampler picks next). Call without holding mu_ only from tests (the forced tokens are read).
  int32_t NextToken(std::span<const int32_t> history, int64_t prompt_size) const {
    return rule_.NextToken(history, prompt_size);
  }

  // The logits [vocab] the fake gives after `history` (what Step returns for that row).
  std::vector<float> LogitsAfter(std::span<const int32_t> history, int64_t prompt_size) const {
    std::vector<float> row(options_.vocab);
    rule_.Fill(history, prompt_size, row);
    return row;
  }

  // Configuration (call before or while the engine loop runs).
  void SetExhausted(int times) {
    std::lock_guard<std::mutex> lock(mu_);
    exhausted_left_ = times;
  }
  void SetCachedPrefix(std::function<int64_t(std::span<const int32_t>)> f) {
    std::lock_guard<std::mutex> lock(mu_);
    cached_for_ = std::move(f);
  }
  // The `k`-th generated token (1-based) of every sequence is `token` (e.g. EOS). Before running.
  void SetForcedToken(int64_t k, int32_t token) {
    std::lock_guard<std::mutex> lock(mu_);
    rule_.forced[k] = token;
  }
  // Step number `n` (0-based) and every later one block until Resume() (StepGate).
  void PauseAtStep(int64_t n) { gate_.PauseAt(n); }
  bool WaitBlocked() { return gate_.WaitBlocked(); }
  void Resume() { gate_.Resume(); }
  // Begin fails with INVALID_ARGUMENT for prompts starting with `token`.
  void SetBeginFailure(int32_t token) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_begin_token_ = token;
  }
  // A sequence whose latest token is `token` gets `value` (NaN, ±infinity) as logit `index` of its row.
  void SetNonFiniteLogit(int32_t token, int64_t index, float value) {
    std::lock_guard<std::mutex> lock(mu_);
    non_finite_[token] = {index, value};
  }
  // Any step containing this token fails with INTERNAL.
  void SetPoisonToken(int32_t token) {
    std::lock_guard<std::mutex> lock(mu_);
    poison_token_ = token;
  }

  // Inspection.
  std::vector<std::vector<Seq>> steps() const {
    std::lock_guard<std::mutex> lock(mu_);
    return steps_;
  }
  std::map<int, int> end_calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return end_calls_;
  }
  int active() const {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int>(active_.size());
  }
  int violations() const {
    std::lock_guard<std::mutex> lock(mu_);
    return violations_;
  }
  int decode_missing() const {
    std::lock_guard<std::mutex> lock(mu_);
    return decode_missing_;
  }
  // Prompts in the order Begin accepted them.
  std::vector<std::vector<int32_t>> begun() const {
    std::lock_guard<std::mutex> lock(mu_);
    return begun_;
  }
  // Tokens the slot's current sequence has run (prompt + decoded).
  int64_t history_size(int slot) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = history_.find(slot);
    return it == history_.end() ? 0 : static_cast<int64_t>(it->second.size());
  }
  int begin_calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return begin_calls_;
  }
  int exhausted_left() const {
    std::lock_guard<std::mutex> lock(mu_);
    return exhausted_left_;
  }

 private:
  // Content tokens in the slot's open segment (mu_ held).
  int64_t OpenLength(int slot) const {
    auto h = history_.find(slot);
    auto c = closed_.find(slot);
    const int64_t run = h == history_.end() ? 0 : static_cast<int64_t>(h->second.size());
    return run - options_.segment * (c == closed_.end() ? 0 : c->second);
  }

  Options options_;
  FakeLogitRule rule_;  // the logits Step answers with (vocab and never_pick from options_)
  mutable std::mutex mu_;
  std::set<int> active_;
  std::map<int, std::vector<int32_t>> history_;
  std::map<int, int64_t> closed_;  // segments closed per slot (Options::segment)
  std::map<int, int64_t> begun_prompt_size_;
  std::map<int, int> end_calls_;
  std::vector<std::vector<Seq>> steps_;
  std::function<int64_t(std::span<const int32_t>)> cached_for_;
  int exhausted_left_ = 0;
  int32_t poison_token_ = -1;
  int32_t fail_begin_token_ = -1;
  std::map<int32_t, std::pair<int64_t, float>> non_finite_;  // SetNonFiniteLogit
  std::vector<std::vector<int32_t>> begun_;
  int decode_missing_ = 0;
  int violations_ = 0;
  int begin_calls_ = 0;

  StepGate gate_;
};

}  // namespace mcserve::engine::testing
