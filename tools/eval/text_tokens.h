// Reading an evaluation text file (--text, --haystack) as a token stream. Any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/tokenizer.h"

namespace mcserve::tools {

// The tokens of the whole UTF-8 file at `path`, without BOS. Unreadable → NotFound naming the path
// and the reason; invalid UTF-8 → InvalidArgument; no tokens (empty or blank) → InvalidArgument.
absl::StatusOr<std::vector<int32_t>> TokenizeTextFile(const engine::Tokenizer& tokenizer, const std::string& path);

}  // namespace mcserve::tools
