#include "clients/cpp/cli_args.h"

#include <algorithm>
#include <cstdlib>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace mcserve::client {
namespace {

// `--flag-name[=v]` → `--flag_name[=v]`, `--no-x` → `--nox`; anything else unchanged.
std::string UnderscoreFlagName(const std::string& arg) {
  if (arg.size() <= 2 || arg.compare(0, 2, "--") != 0) return arg;
  std::string out = arg;
  const size_t end = std::min(out.find('='), out.size());
  std::replace(out.begin() + 2, out.begin() + static_cast<std::ptrdiff_t>(end), '-', '_');
  if (out.compare(0, 5, "--no_") == 0) out.erase(4, 1);
  return out;
}

// The list flag `arg` names (`--stop` or `--stop=...`), or "".
std::string ListFlagOf(const std::string& arg, const std::vector<std::string>& list_flags) {
  for (const std::string& name : list_flags) {
    const std::string flag = "--" + name;
    if (arg == flag || absl::StartsWith(arg, flag + "=")) return name;
  }
  return "";
}

}  // namespace

std::vector<std::string> NormalizeArgs(int argc, char** argv,
                                       const std::vector<std::pair<std::string, std::string>>& env_defaults,
                                       const std::vector<std::string>& list_flags) {
  std::vector<std::string> out = {argc > 0 ? argv[0] : "mcserve-cli"};
  for (const auto& [variable, flag] : env_defaults) {
    const char* value = std::getenv(variable.c_str());
    if (value != nullptr && *value != '\0') out.push_back(absl::StrCat("--", flag, "=", value));
  }
  std::map<std::string, std::vector<std::string>> lists;  // list flag → its values, in order
  std::map<std::string, size_t> list_slot;                // list flag → its index in `out`
  bool flags_ended = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (flags_ended || arg == "--") {
      flags_ended = true;
      out.push_back(std::move(arg));
      continue;
    }
    arg = UnderscoreFlagName(arg);
    const std::string list = ListFlagOf(arg, list_flags);
    if (list.empty()) {
      out.push_back(std::move(arg));
      continue;
    }
    std::string value;
    if (arg.size() > list.size() + 2) {
      value = arg.substr(list.size() + 3);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      out.push_back(std::move(arg));  // absl reports the missing value
      continue;
    }
    if (!list_slot.count(list)) {
      list_slot[list] = out.size();
      out.emplace_back();
    }
    lists[list].push_back(std::move(value));
  }
  for (const auto& [list, slot] : list_slot) out[slot] = absl::StrCat("--", list, "=", absl::StrJoin(lists[list], ","));
  return out;
}

}  // namespace mcserve::client
