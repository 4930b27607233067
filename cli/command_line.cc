#include "cli/command_line.h"

#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "cli/flag_values.h"

namespace mcserve::cli {

std::vector<char*> NormalizeFlagNames(int argc, char** argv, std::vector<std::string>* storage) {
  *storage = NormalizedFlagNames(argc, argv);
  std::vector<char*> out;
  for (std::string& arg : *storage) out.push_back(arg.data());
  return out;
}

void SetToolUsage(const std::string& tool_dir, const std::string& usage_message) {
  // absl would otherwise list only flags from a file named like the binary.
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [tool_dir](absl::string_view file) {
    return absl::StrContains(file, tool_dir) || absl::StrContains(file, "cli/");
  };
  absl::SetFlagsUsageConfig(usage);
  absl::SetProgramUsageMessage(usage_message);
}

}  // namespace mcserve::cli
