// The passkey prompt (mcserve-eval passkey): a 5-digit key hidden at a chosen depth in filler
// text, followed by a question. As text, with <filler> cut from the haystack, the standard template:
//   There is a pass key hidden in this text. <filler before> The pass key is 68213. Remember it.
//   68213 is the pass key. <filler after> What is the pass key? The pass key is
// and the "trained" one, tools/train/passkey.py's wording (its examples are this at depth 0):
//   <filler before> The pass key is 68213. Remember it. <filler after> What is the pass key? The pass key is
// Assembled from token ids: [BOS] + Encode(intro) + filler[0, a) + Encode(needle) + filler[a, F)
// + Encode(question), exactly `length` ids. The filler is F consecutive haystack tokens starting at
// a word-initial piece; the needle goes in at `a`, the first word start at or after depth·F (so
// no word is split around it; the depth actually used is a/F). The filler's last word may be cut.
// Any thread (the tokenizer is thread-safe).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/tokenizer.h"

namespace mcserve::tools {

// A prompt template's three pieces; "{key}" stands for the key's digits.
struct PasskeyTemplate {
  std::string_view name;
  std::string_view intro;  // may be empty
  std::string_view needle;
  std::string_view question;
};

// The default: the usual passkey retrieval wording (Landmark Attention, LongLoRA, …).
inline constexpr PasskeyTemplate kStandardPasskeyTemplate = {
    .name = "standard",
    .intro = "There is a pass key hidden in this text.",
    .needle = "The pass key is {key}. Remember it. {key} is the pass key.",
    .question = "What is the pass key? The pass key is"};

// The wording of the passkey examples tools/train mixes into training (--passkey-fraction).
inline constexpr PasskeyTemplate kTrainedPasskeyTemplate = {
    .name = "trained",
    .intro = "",
    .needle = "The pass key is {key}. Remember it.",
    .question = "What is the pass key? The pass key is"};

// The template called `name` ("standard" or "trained"); else InvalidArgument.
absl::StatusOr<PasskeyTemplate> PasskeyTemplateByName(std::string_view name);

struct PasskeyPrompt {
  std::vector<int32_t> ids;     // the prompt, BOS first
  int64_t filler_tokens = 0;    // F
  int64_t needle_position = 0;  // index in `ids` of the needle's first token
  double depth = 0;             // a / F (0 when F = 0)
};

// True if token `i` of `ids` begins a word (its piece starts with SentencePiece's "▁", seen as a
// space between it and token i−1 when decoded); token 0 counts as a word start.
bool StartsWord(const engine::Tokenizer& tokenizer, std::span<const int32_t> ids, size_t i);

// Tokens `templ` takes by itself: BOS, intro, needle and question for `key`.
absl::StatusOr<int64_t> PasskeyTemplateTokens(const engine::Tokenizer& tokenizer, const PasskeyTemplate& templ,
                                              const std::string& key);

// The prompt of `length` tokens for `key` in `templ` with its filler from
// haystack[filler_start, ...) and the needle at fractional `depth` in [0, 1]. filler_start should
// be a word start. Too short a length or haystack → InvalidArgument.
absl::StatusOr<PasskeyPrompt> BuildPasskeyPrompt(const engine::Tokenizer& tokenizer, const PasskeyTemplate& templ,
                                                 std::span<const int32_t> haystack, int64_t filler_start,
                                                 int64_t length, double depth, const std::string& key);

}  // namespace mcserve::tools
