#include "tools/eval/text_tokens.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace mcserve::tools {

absl::StatusOr<std::vector<int32_t>> TokenizeTextFile(const engine::Tokenizer& tokenizer, const std::string& path) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) return absl::NotFoundError(absl::StrCat("cannot read ", path, ": it is a directory"));
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return absl::NotFoundError(absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
  auto ids = tokenizer.Encode(text.str(), /*add_bos=*/false);
  if (!ids.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", ids.status().message()));
  if (ids->empty()) return absl::InvalidArgumentError(absl::StrCat(path, " holds no text"));
  return ids;
}

}  // namespace mcserve::tools
