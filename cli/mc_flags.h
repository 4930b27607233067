// The Memory Caching flags shared by mcserve, mcserve-run and mcserve-eval (one definition, in
// mc_flags.cc): --mc-aggregation, --mc-segmentation, --mc-segment-size, --mc-init-mode, --mc-gate,
// --mc-pool, --mc-top-k, --mc-mean-combine, --mc-layers, --checkpoint-device-mib,
// --checkpoint-host-mib and --ssc-hot-pages. Read them from the main thread after parsing.
#pragma once

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "cli/flag_values.h"
#include "engine/mc/checkpoint_store.h"

namespace mcserve::cli {

// The --mc-* flags that were given, as Model::Load's Memory Caching overrides (field → value).
std::map<std::string, std::string> McOverridesFromFlags();

// --checkpoint-device-mib, --checkpoint-host-mib and --ssc-hot-pages as checkpoint store options;
// a bad value → InvalidArgument naming the flag.
absl::StatusOr<engine::CheckpointStoreOptions> CheckpointOptionsFromFlags();

}  // namespace mcserve::cli
