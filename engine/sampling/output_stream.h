// OutputStream: the text side of one generation stream — incremental detokenization plus the stop
// conditions (EOS, stop ids, stop strings, max_tokens, min_tokens) with vLLM's semantics. One
// instance per request; not thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/tokenizer.h"

namespace mcserve::engine {

// When a stream ends (same meaning as vLLM's SamplingParams fields of that name).
struct StopCriteria {
  int max_tokens = 16;                    // ≥ 1
  int min_tokens = 0;                     // EOS and stop ids are banned until this many were generated
  std::vector<int32_t> stop_token_ids;    // in addition to EOS
  std::vector<std::string> stop_strings;  // may span tokens; the text is cut before the match
  bool ignore_eos = false;
  bool include_stop_string = false;       // keep the matched stop string in the text
};

enum class FinishReason { kNone, kLength, kStop, kCancelled, kError };
// "length", "stop", "cancelled", "error", "" for kNone.
const char* FinishReasonName(FinishReason r);

// Turns generated ids into text deltas: never splits a UTF-8 character, holds back text that could be
// the start of a stop string, ends the stream on EOS / a stop id / a stop string / max_tokens.
class OutputStream {
 public:
  // InvalidArgument for bad criteria (max_tokens < 1, min_tokens > max_tokens, empty stop string).
  // `prompt` ([prompt_len] ids) is the text's left context: the first piece keeps its leading space.
  static absl::StatusOr<OutputStream> Create(const Tokenizer* tokenizer, StopCriteria criteria, int32_t eos_id,
                                             std::span<const int32_t> prompt = {});
  struct Delta {
    std::string text;                     // newly final text (possibly empty)
    FinishReason finish = FinishReason::kNone;
    std::string stop;                     // the stop string matched, or "" (stop ids: "")
    std::optional<int32_t> stop_token;    // the stop/EOS id that ended it
  };
  // Appends a generated id. Once finish != kNone, the stream is over (further Push → FailedPrecondition).
  absl::StatusOr<Delta> Push(int32_t id);
  // Ids the sampler must not pick now (EOS unless ignore_eos, and stop ids, while below min_tokens).
  std::vector<int32_t> BannedIds() const;
  int generated() const;

 private:
  OutputStream(const Tokenizer* tokenizer, StopCriteria criteria, int32_t eos_id);
  // Position and index of the earliest stop string that ends after byte `new_from` of pending_, or
  // {npos, -1}.
  std::pair<size_t, int> FindStop(size_t new_from) const;
  // Length of the longest suffix of pending_ that is a proper prefix of some stop string.
  size_t HeldBack() const;

  StopCriteria criteria_;
  int32_t eos_id_;
  IncrementalDetokenizer detok_;
  std::string pending_;  // decoded text not yet emitted (may end in a stop-string prefix)
  int generated_ = 0;
  bool finished_ = false;
};

}  // namespace mcserve::engine
