// mcserve-cli's command line before absl parses it: dashed flag names, environment defaults and
// repeatable list flags.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace mcserve::client {

// argv rewritten for absl::ParseCommandLine:
// - `--flag-name` → `--flag_name` and `--no-flag` → `--noflag` (up to a bare `--`);
// - for each (VARIABLE, flag) in `env_defaults` whose variable is set and not empty, `--flag=VALUE`
//   goes first, so the command line wins;
// - every occurrence of a flag in `list_flags` (`--stop=a --stop b`) is merged into one comma list
//   at the first occurrence (`--stop=a,b`).
std::vector<std::string> NormalizeArgs(int argc, char** argv,
                                       const std::vector<std::pair<std::string, std::string>>& env_defaults,
                                       const std::vector<std::string>& list_flags);

}  // namespace mcserve::client
