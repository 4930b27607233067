// Tokenizing a client's text within the prompt limit (--max-prompt-tokens), for Generate and
// Tokenize: a text too long to fit is refused before the tokenizer runs, so a large message cannot
// hold a gRPC thread for seconds.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/model/tokenizer.h"

namespace mcserve::server {

// Texts longer than this many bytes per allowed token are refused without tokenizing (no
// SentencePiece piece of a usual vocabulary covers as many).
inline constexpr int64_t kMaxTextBytesPerToken = 32;

// The ids of `text` (BOS first when `add_bos`); INVALID_ARGUMENT naming `field` when `text` is not
// UTF-8, is longer than kMaxTextBytesPerToken × `max_tokens` bytes, or has more than `max_tokens`
// ids. Any thread.
absl::StatusOr<std::vector<int32_t>> TokenizeWithinLimit(const engine::Tokenizer& tokenizer, std::string_view text,
                                                         bool add_bos, int64_t max_tokens, absl::string_view field);

}  // namespace mcserve::server
