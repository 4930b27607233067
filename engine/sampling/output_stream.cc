#include "engine/sampling/output_stream.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace mcserve::engine {

const char* FinishReasonName(FinishReason r) {
  switch (r) {
    case FinishReason::kNone:
      return "";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kCancelled:
      return "cancelled";
    case FinishReason::kError:
      return "error";
  }
  return "";
}

absl::StatusOr<OutputStream> OutputStream::Create(const Tokenizer* tokenizer, StopCriteria criteria, int32_t eos_id,
                                                  std::span<const int32_t> prompt) {
  if (tokenizer == nullptr) return absl::InvalidArgumentError("OutputStream needs a tokenizer");
  if (criteria.max_tokens < 1) {
    return absl::InvalidArgumentError(absl::StrCat("max_tokens must be at least 1, got ", criteria.max_tokens));
  }
  if (criteria.min_tokens < 0 || criteria.min_tokens > criteria.max_tokens) {
    return absl::InvalidArgumentError(absl::StrCat("min_tokens must be in [0, max_tokens=", criteria.max_tokens,
                                                   "], got ", criteria.min_tokens));
  }
  const int32_t vocab = tokenizer->vocab_size();
  for (int32_t id : criteria.stop_token_ids) {
    if (id < 0 || id >= vocab) {
      return absl::InvalidArgumentError(
          absl::StrCat("stop_token_ids: id ", id, " is outside the vocabulary [0, ", vocab, ")"));
    }
  }
  for (size_t i = 0; i < criteria.stop_strings.size(); ++i) {
    if (criteria.stop_strings[i].empty()) {
      return absl::InvalidArgumentError(absl::StrCat("stop_strings[", i, "] is empty"));
    }
    if (!IsValidUtf8(criteria.stop_strings[i])) {
      return absl::InvalidArgumentError(absl::StrCat("stop_strings[", i, "] is not valid UTF-8"));
    }
  }
  OutputStream stream(tokenizer, std::move(criteria), eos_id);
  MCSERVE_RETURN_IF_ERROR(stream.detok_.SetContext(prompt));
  return stream;
}

OutputStream::OutputStream(const Tokenizer* tokenizer, StopCriteria criteria, int32_t eos_id)
    : criteria_(std::move(criteria)), eos_id_(eos_id), detok_(tokenizer) {}

int OutputStream::generated() const { return generated_; }

std::vector<int32_t> OutputStream::BannedIds() const {
  std::vector<int32_t> banned;
  if (finished_ || generated_ >= criteria_.min_tokens) return banned;
  if (!criteria_.ignore_eos && eos_id_ >= 0) banned.push_back(eos_id_);
  for (int32_t id : criteria_.stop_token_ids) {
    if (std::find(banned.begin(), banned.end(), id) == banned.end()) banned.push_back(id);
  }
  return banned;
}

std::pair<size_t, int> OutputStream::FindStop(size_t new_from) const {
  std::pair<size_t, int> best{std::string::npos, -1};
  for (size_t i = 0; i < criteria_.stop_strings.size(); ++i) {
    const std::string& stop = criteria_.stop_strings[i];
    // A match must end after new_from: start ≥ new_from − |stop| + 1.
    const size_t from = new_from + 1 > stop.size() ? new_from + 1 - stop.size() : 0;
    const size_t at = pending_.find(stop, from);
    if (at != std::string::npos && at < best.first) best = {at, static_cast<int>(i)};
  }
  return best;
}

size_t OutputStream::HeldBack() const {
  size_t held = 0;
  for (const std::string& stop : criteria_.stop_strings) {
    // Longest k < |stop| with pending_ ending in stop[0, k).
    for (size_t k = std::min(stop.size() - 1, pending_.size()); k > held; --k) {
      if (pending_.compare(pending_.size() - k, k, stop, 0, k) == 0) {
        held = k;
        break;
      }
    }
  }
  return held;
}

absl::StatusOr<OutputStream::Delta> OutputStream::Push(int32_t id) {
  if (finished_) return absl::FailedPreconditionError("the output stream already finished");
  const int count = generated_ + 1;
  // vLLM: no stop condition applies before min_tokens ids; EOS (unless ignored) and stop ids end
  // the stream, and their text is left out unless include_stop_string.
  std::optional<int32_t> stop_token;
  if (count >= criteria_.min_tokens) {
    const bool is_stop_id = std::find(criteria_.stop_token_ids.begin(), criteria_.stop_token_ids.end(), id) !=
                            criteria_.stop_token_ids.end();
    if ((id == eos_id_ && !criteria_.ignore_eos) || is_stop_id) stop_token = id;
  }
  const bool ends = stop_token.has_value() || count >= criteria_.max_tokens;

  const size_t old_size = pending_.size();
  if (!stop_token.has_value() || criteria_.include_stop_string) {
    MCSERVE_ASSIGN_OR_RETURN(std::string text, detok_.Push(id));
    pending_ += text;
  }
  if (ends) pending_ += detok_.Flush();
  generated_ = count;

  Delta delta;
  // Stop strings: matched only once more than min_tokens ids were generated, and only if the match
  // ends in this id's text; the earliest match wins.
  if (!criteria_.stop_strings.empty() && count > criteria_.min_tokens && pending_.size() > old_size) {
    const auto [at, which] = FindStop(old_size);
    if (which >= 0) {
      const std::string& stop = criteria_.stop_strings[which];
      delta.text = pending_.substr(0, criteria_.include_stop_string ? at + stop.size() : at);
      delta.finish = FinishReason::kStop;
      delta.stop = stop;
      pending_.clear();
      finished_ = true;
      return delta;
    }
  }
  if (ends) {
    delta.text = std::move(pending_);
    pending_.clear();
    delta.finish = stop_token.has_value() ? FinishReason::kStop : FinishReason::kLength;
    delta.stop_token = stop_token;
    finished_ = true;
    return delta;
  }
  const size_t held = HeldBack();
  delta.text = pending_.substr(0, pending_.size() - held);
  pending_.erase(0, pending_.size() - held);
  return delta;
}

}  // namespace mcserve::engine
