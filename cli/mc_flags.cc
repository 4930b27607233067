#include "cli/mc_flags.h"

#include <utility>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"

// Memory Caching (docs/memory-caching.md); each overrides the model's config.json `memory_caching`.
ABSL_FLAG(std::string, mc_aggregation, "", "Memory Caching aggregation: residual, grm, soup, ssc, mean, or none (off)");
ABSL_FLAG(std::string, mc_segmentation, "", "Memory Caching segmentation: constant or logarithmic");
ABSL_FLAG(std::string, mc_segment_size, "", "Memory Caching segment size (constant segmentation)");
ABSL_FLAG(std::string, mc_init_mode, "", "Memory Caching init mode: independent or checkpoint");
ABSL_FLAG(std::string, mc_gate, "", "Memory Caching gate input: q or u_proj");
ABSL_FLAG(std::string, mc_pool, "", "Memory Caching key pooling: mean or sum");
ABSL_FLAG(std::string, mc_top_k, "", "Memory Caching: segments SSC's router keeps per token");
ABSL_FLAG(std::string, mc_mean_combine, "", "Memory Caching mean aggregation: add or average");
ABSL_FLAG(std::string, mc_layers, "", "Memory Caching layers: all, or a comma-separated list of indices");
ABSL_FLAG(double, checkpoint_device_mib, -1,
          "Memory Caching checkpoints: MiB of memories kept on the device tier; the rest go to the host "
          "tier. -1 = unlimited");
ABSL_FLAG(double, checkpoint_host_mib, -1, "Memory Caching checkpoints: MiB of the host tier; -1 = unlimited");
ABSL_FLAG(int, ssc_hot_pages, 32,
          "SSC: host-tier checkpoint pages kept staged on the device per layer between steps");

namespace mcserve::cli {

std::map<std::string, std::string> McOverridesFromFlags() {
  std::map<std::string, std::string> overrides;
  const std::pair<const char*, const absl::Flag<std::string>*> flags[] = {
      {"aggregation", &FLAGS_mc_aggregation}, {"segmentation", &FLAGS_mc_segmentation},
      {"segment_size", &FLAGS_mc_segment_size}, {"init_mode", &FLAGS_mc_init_mode}, {"gate", &FLAGS_mc_gate},
      {"pool", &FLAGS_mc_pool}, {"top_k", &FLAGS_mc_top_k}, {"mean_combine", &FLAGS_mc_mean_combine},
      {"layers", &FLAGS_mc_layers}};
  for (const auto& [field, flag] : flags) {
    const std::string value = absl::GetFlag(*flag);
    if (!value.empty()) overrides[field] = value;
  }
  return overrides;
}

absl::StatusOr<engine::CheckpointStoreOptions> CheckpointOptionsFromFlags() {
  engine::CheckpointStoreOptions options;
  auto device = engine::BudgetBytesFromMib(absl::GetFlag(FLAGS_checkpoint_device_mib));
  if (!device.ok()) return ForFlag("checkpoint-device-mib", device.status());
  auto host = engine::BudgetBytesFromMib(absl::GetFlag(FLAGS_checkpoint_host_mib));
  if (!host.ok()) return ForFlag("checkpoint-host-mib", host.status());
  options.device_bytes = *device;
  options.host_bytes = *host;
  options.hot_pages = absl::GetFlag(FLAGS_ssc_hot_pages);
  if (options.hot_pages < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--ssc-hot-pages: ", options.hot_pages, " is negative"));
  }
  return options;
}

}  // namespace mcserve::cli
