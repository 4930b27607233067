#include "cli/model_flags.h"

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "cli/mc_flags.h"

ABSL_FLAG(std::string, model, "", "Model directory (config.json, model.safetensors, tokenizer.model); "
                                  "default: the bundled model");
ABSL_FLAG(int, threads, 0, "CPU threads; 0 = all cores");
ABSL_FLAG(std::string, device, "",
          "cpu, cuda, or cuda-emu (the CUDA kernels run by the CPU emulator, for tests); default: cuda when a "
          "GPU is present, else cpu");

namespace mcserve::cli {

std::string ModelDirFromFlags(const std::string& default_dir) {
  const std::string dir = absl::GetFlag(FLAGS_model);
  return dir.empty() ? default_dir : dir;
}

absl::StatusOr<kernels::Device> DeviceFromFlags() {
  return DeviceFromFlagValue(absl::GetFlag(FLAGS_device));
}

int ThreadsFromFlags() { return absl::GetFlag(FLAGS_threads); }

absl::StatusOr<std::unique_ptr<engine::Model>> LoadModelFromFlags(const std::string& default_dir) {
  auto device = DeviceFromFlags();
  if (!device.ok()) return device.status();
  return engine::Model::Load(ModelDirFromFlags(default_dir),
                             {.device = *device, .num_threads = ThreadsFromFlags(), .mc_overrides = McOverridesFromFlags()});
}

}  // namespace mcserve::cli
