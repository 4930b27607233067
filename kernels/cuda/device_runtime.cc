// RuntimeFor: the device runtime of a tensor device.
#include "kernels/core/device_runtime.h"

#include "absl/strings/str_cat.h"
#include "kernels/cuda/emu/emu_device_runtime.h"
#if defined(MCSERVE_WITH_CUDA)
#include "kernels/cuda/cuda_runtime.h"
#endif

namespace mcserve::kernels {

absl::StatusOr<DeviceRuntime*> RuntimeFor(Device device) {
  switch (device) {
    case Device::kCudaEmu:
      return &emu::EmuRuntime();
    case Device::kCuda:
#if defined(MCSERVE_WITH_CUDA)
      return internal::CudaDeviceRuntime();
#else
      return absl::UnimplementedError("built without CUDA");
#endif
    case Device::kCpu:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("RuntimeFor: device ", DeviceName(device), " has no device runtime (host memory)"));
}

absl::StatusOr<Device> DeviceFromName(const std::string& name) {
  if (name.empty()) return RuntimeFor(Device::kCuda).ok() ? Device::kCuda : Device::kCpu;
  if (name == "cpu") return Device::kCpu;
  if (name == "cuda") return Device::kCuda;
  if (name == "cuda-emu") return Device::kCudaEmu;
  return absl::InvalidArgumentError("\"" + name + "\" is not one of cpu, cuda, cuda-emu");
}

}  // namespace mcserve::kernels
