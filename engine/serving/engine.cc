#include "engine/serving/engine.h"

#include <utility>

#include "base/status_macros.h"

namespace mcserve::engine {

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(std::unique_ptr<ModelRunner> runner,
                                                       const Tokenizer* tokenizer, EngineOptions options) {
  if (runner == nullptr) return absl::InvalidArgumentError("Engine: a model runner is required");
  std::unique_ptr<Engine> engine(new Engine());
  engine->runner_ = std::move(runner);
  SchedulerOptions so;
  so.max_waiting = options.max_waiting;
  so.max_batch_tokens = options.max_batch_tokens;
  so.max_prompt_tokens = options.max_prompt_tokens;
  so.channel_capacity = options.channel_capacity;
  so.stop_at_every_boundary = options.stop_at_every_boundary;
  so.latency_observer = options.latency_observer;
  so.write_timeout = options.write_timeout;
  MCSERVE_ASSIGN_OR_RETURN(engine->scheduler_, Scheduler::Create(engine->runner_.get(), tokenizer, so));
  return engine;
}

Engine::~Engine() { Shutdown(); }

absl::StatusOr<std::shared_ptr<RequestHandle>> Engine::Submit(RequestSpec spec) {
  return scheduler_->Submit(std::move(spec));
}

absl::Status Engine::Abort(uint64_t id) { return scheduler_->Abort(id); }

void Engine::Shutdown() {
  if (scheduler_ != nullptr) scheduler_->Shutdown();
}

EngineStats Engine::Stats() const { return scheduler_->Stats(); }

int Engine::EffectiveConcurrency() const { return scheduler_->num_slots(); }

}  // namespace mcserve::engine
