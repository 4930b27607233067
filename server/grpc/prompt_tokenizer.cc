#include "server/grpc/prompt_tokenizer.h"

#include "absl/strings/str_cat.h"

namespace mcserve::server {

absl::StatusOr<std::vector<int32_t>> TokenizeWithinLimit(const engine::Tokenizer& tokenizer, std::string_view text,
                                                         bool add_bos, int64_t max_tokens, absl::string_view field) {
  const int64_t bytes = static_cast<int64_t>(text.size());
  if (bytes / kMaxTextBytesPerToken > max_tokens) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", bytes, " bytes cannot fit the server's limit of ",
                                                   max_tokens, " tokens (--max-prompt-tokens)"));
  }
  if (!engine::IsValidUtf8(text)) return absl::InvalidArgumentError(absl::StrCat(field, ": not valid UTF-8"));
  absl::StatusOr<std::vector<int32_t>> ids = tokenizer.Encode(text, add_bos);
  if (!ids.ok()) return absl::InvalidArgumentError(absl::StrCat(field, ": ", ids.status().message()));
  if (static_cast<int64_t>(ids->size()) > max_tokens) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", ids->size(), " tokens, over the server's limit of ",
                                                   max_tokens, " (--max-prompt-tokens)"));
  }
  return ids;
}

}  // namespace mcserve::server
