#include "cli/flag_values.h"

#include "absl/strings/str_cat.h"
#include "kernels/core/device_runtime.h"

namespace mcserve::cli {

absl::Status ForFlag(const char* flag, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat("--", flag, ": ", status.message()));
}

absl::StatusOr<kernels::Device> DeviceFromFlagValue(const std::string& value) {
  auto device = kernels::DeviceFromName(value);
  if (!device.ok()) return ForFlag("device", device.status());
  return *device;
}

}  // namespace mcserve::cli
