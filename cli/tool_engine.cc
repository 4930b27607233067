#include "cli/tool_engine.h"

#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/serving/recurrent_runner.h"

namespace mcserve::cli {

absl::StatusOr<std::unique_ptr<engine::Engine>> OneSlotEngine(const engine::Model& model,
                                                              const engine::CheckpointStoreOptions& store,
                                                              int64_t chunk) {
  if (chunk < 1) {
    return absl::InvalidArgumentError(absl::StrCat("prompt tokens per step must be positive, got ", chunk));
  }
  MCSERVE_ASSIGN_OR_RETURN(std::unique_ptr<engine::RecurrentRunner> runner,
                           engine::RecurrentRunner::Create(
                               &model, {.num_slots = 1, .checkpoints = store, .prefix_caching = false}));
  engine::EngineOptions options;
  options.max_waiting = 1;
  options.max_batch_tokens = chunk;
  options.max_prompt_tokens = std::numeric_limits<int64_t>::max();
  options.write_timeout = absl::InfiniteDuration();
  return engine::Engine::Create(std::move(runner), &model.tokenizer(), options);
}

}  // namespace mcserve::cli
