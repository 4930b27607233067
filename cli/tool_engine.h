// The Engine mcserve-run and mcserve-eval drive: the server's Engine with one slot over a
// RecurrentRunner, so the tools run requests exactly as the server does. Caller's thread.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "engine/mc/checkpoint_store.h"
#include "engine/runner/model.h"
#include "engine/serving/engine.h"

namespace mcserve::cli {

// A one-slot Engine over `model` (which must outlive it) with a checkpoint store of `store`'s
// budgets, `chunk` prompt tokens per step, prefix caching off (every request runs from a fresh
// state), no limit on prompt length and no write timeout (the tool reads at its own pace).
// InvalidArgument when `chunk` < 1.
absl::StatusOr<std::unique_ptr<engine::Engine>> OneSlotEngine(const engine::Model& model,
                                                              const engine::CheckpointStoreOptions& store,
                                                              int64_t chunk);

}  // namespace mcserve::cli
