// Command-line conventions shared by the mcserve tools (mcserve-run, mcserve-eval): dashed flag
// names and a --help that lists the tool's own flags and the shared ones. Main thread, before
// absl::ParseCommandLine.
#pragma once

#include <string>
#include <vector>

namespace mcserve::cli {

// argv as NormalizedFlagNames (cli/flag_values.h) spells it, as the char* absl parses; the strings
// live in `storage`.
std::vector<char*> NormalizeFlagNames(int argc, char** argv, std::vector<std::string>* storage);

// Makes --help list the flags defined under `tool_dir` (e.g. "tools/eval/") and cli/,
// and sets the usage message printed above them.
void SetToolUsage(const std::string& tool_dir, const std::string& usage_message);

}  // namespace mcserve::cli
