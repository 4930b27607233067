// Turning a flag's value into what the engine takes, with errors that name the flag. Shared by
// mcserve, mcserve-run and mcserve-eval; call from the main thread.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/core/dtype.h"

namespace mcserve::cli {

// `status` with "--<flag>: " in front of its message (`flag` spelled with dashes).
absl::Status ForFlag(const char* flag, const absl::Status& status);

// argv with every "--flag-name[=value]" spelled as absl's "--flag_name[=value]" (values are left
// alone) and "--no-x" / "--no_x" as "--nox", so each flag may be written with dashes or underscores.
std::vector<std::string> NormalizedFlagNames(int argc, char** argv);

// The device a --device value names ("cpu", "cuda", "cuda-emu", or "" for cuda when a GPU is
// usable, else cpu); InvalidArgument naming --device otherwise.
absl::StatusOr<kernels::Device> DeviceFromFlagValue(const std::string& value);

}  // namespace mcserve::cli
