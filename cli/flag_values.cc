#include "cli/flag_values.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/core/device_runtime.h"

namespace mcserve::cli {

absl::Status ForFlag(const char* flag, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat("--", flag, ": ", status.message()));
}

std::vector<std::string> NormalizedFlagNames(int argc, char** argv) {
  std::vector<std::string> out;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    if (i > 0 && arg.rfind("--", 0) == 0) {
      const size_t end = std::min(arg.find('='), arg.size());
      for (size_t j = 2; j < end; ++j) {
        if (arg[j] == '-') arg[j] = '_';
      }
      if (arg.rfind("--no_", 0) == 0) arg = "--no" + arg.substr(5);
    }
    out.push_back(std::move(arg));
  }
  return out;
}

absl::StatusOr<kernels::Device> DeviceFromFlagValue(const std::string& value) {
  auto device = kernels::DeviceFromName(value);
  if (!device.ok()) return ForFlag("device", device.status());
  return *device;
}

}  // namespace mcserve::cli
