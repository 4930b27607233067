#include "server/common/api_keys.h"

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace mcserve::server {
namespace {

bool IsValidName(absl::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') return false;
  }
  return true;
}

}  // namespace

bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  // Walk the longer length so the time does not reveal a matching prefix.
  const size_t n = std::max(a.size(), b.size());
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

ApiKeys ApiKeys::Single(std::string key) {
  ApiKeys keys;
  if (!key.empty()) keys.keys_.push_back({"default", std::move(key)});
  return keys;
}

absl::StatusOr<ApiKeys> ApiKeys::Parse(absl::string_view text, absl::string_view source) {
  ApiKeys keys;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    std::vector<absl::string_view> fields = absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    const std::string where = absl::StrCat(source, ":", line_number, ": ");
    if (fields.size() != 2) {
      return absl::InvalidArgumentError(absl::StrCat(where, "expected `NAME KEY`, got ", fields.size(), " fields"));
    }
    if (!IsValidName(fields[0])) {
      return absl::InvalidArgumentError(absl::StrCat(where, "the name must be 1-64 of [A-Za-z0-9_.-]"));
    }
    for (const Key& k : keys.keys_) {
      if (k.name == fields[0]) return absl::InvalidArgumentError(absl::StrCat(where, "the name \"", k.name, "\" is repeated"));
      if (k.secret == fields[1]) {
        return absl::InvalidArgumentError(absl::StrCat(where, "the key of \"", fields[0], "\" is also \"", k.name, "\"'s"));
      }
    }
    keys.keys_.push_back({std::string(fields[0]), std::string(fields[1])});
  }
  if (keys.keys_.empty()) return absl::InvalidArgumentError(absl::StrCat(source, ": no key (lines `NAME KEY`)"));
  return keys;
}

absl::StatusOr<ApiKeys> ApiKeys::FromFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("cannot read the API key file \"", path, "\""));
  std::stringstream text;
  text << in.rdbuf();
  return Parse(text.str(), path);
}

std::optional<std::string> ApiKeys::Authenticate(absl::string_view authorization) const {
  constexpr absl::string_view kBearer = "Bearer ";
  if (!absl::StartsWith(authorization, kBearer)) return std::nullopt;
  const absl::string_view presented = authorization.substr(kBearer.size());
  std::optional<std::string> match;
  for (const Key& k : keys_) {  // every key is compared, whichever matches
    if (ConstantTimeEquals(presented, k.secret) && !match.has_value()) match = k.name;
  }
  return match;
}

std::vector<std::string> ApiKeys::names() const {
  std::vector<std::string> out;
  for (const Key& k : keys_) out.push_back(k.name);
  return out;
}

}  // namespace mcserve::server
