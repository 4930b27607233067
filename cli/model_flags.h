// The flags choosing and loading a model, shared by mcserve-run and mcserve-eval (one definition,
// in model_flags.cc): --model, --device, --threads, plus the Memory Caching flags of mc_flags.h.
// Read them from the main thread after parsing.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/runner/model.h"
#include "kernels/core/context.h"
#include "cli/mc_flags.h"  // ForFlag

namespace mcserve::cli {

// --model, or `default_dir` when it was not given.
std::string ModelDirFromFlags(const std::string& default_dir);

// --device, resolved: the default is cuda when a GPU is usable, else cpu.
absl::StatusOr<kernels::Device> DeviceFromFlags();

// --threads (CPU worker threads; 0 = all cores).
int ThreadsFromFlags();

// Loads ModelDirFromFlags(default_dir) on DeviceFromFlags() with --threads and the --mc-* overrides.
absl::StatusOr<std::unique_ptr<engine::Model>> LoadModelFromFlags(const std::string& default_dir);

}  // namespace mcserve::cli
