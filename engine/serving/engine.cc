// Engine: creation, the thread-safe API (Submit, Abort, Shutdown, Stats) and the stats snapshot.
#include "engine/serving/engine.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/thread_name.h"

namespace mcserve::engine {

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(std::unique_ptr<ModelRunner> runner,
                                                       const Tokenizer* tokenizer, EngineOptions options) {
  if (runner == nullptr) return absl::InvalidArgumentError("Engine: a model runner is required");
  if (tokenizer == nullptr) return absl::InvalidArgumentError("Engine: a tokenizer is required");
  if (runner->num_slots() < 1) return absl::InvalidArgumentError("Engine: the runner has no state slots");
  if (options.max_waiting < 0) {
    return absl::InvalidArgumentError(absl::StrCat("max_waiting must be ≥ 0, got ", options.max_waiting));
  }
  if (options.max_batch_tokens < runner->num_slots()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_batch_tokens (", options.max_batch_tokens, ") must be at least the number of state slots (",
        runner->num_slots(), ") so that every running request can decode each step"));
  }
  if (options.max_prompt_tokens < 1) {
    return absl::InvalidArgumentError(absl::StrCat("max_prompt_tokens must be ≥ 1, got ", options.max_prompt_tokens));
  }
  if (options.max_tokens_limit < 1) {
    return absl::InvalidArgumentError(absl::StrCat("max_tokens_limit must be ≥ 1, got ", options.max_tokens_limit));
  }
  if (options.channel_capacity < 1) {
    return absl::InvalidArgumentError(absl::StrCat("channel_capacity must be ≥ 1, got ", options.channel_capacity));
  }
  std::unique_ptr<Engine> e(new Engine(std::move(runner), tokenizer, options));
  e->PublishStats();
  e->thread_ = std::thread([p = e.get()] { p->Loop(); });
  NameThread(e->thread_.native_handle(), "mcserve-engine");
  return e;
}

Engine::Engine(std::unique_ptr<ModelRunner> runner, const Tokenizer* tokenizer, EngineOptions options)
    : runner_(std::move(runner)),
      tokenizer_(tokenizer),
      options_(options),
      num_slots_(runner_->num_slots()),
      vocab_size_(runner_->vocab_size()),
      boundary_(runner_->boundary_tokens()),
      // Prompt ids must be known to both the tokenizer and the model.
      limits_{.vocab_size = std::min<int32_t>(vocab_size_, tokenizer->vocab_size()),
              .max_prompt_tokens = options.max_prompt_tokens,
              .max_tokens_limit = options.max_tokens_limit,
              .max_positions = runner_->max_positions()} {
  counters_.slots_total = num_slots_;
}

Engine::~Engine() { Shutdown(); }

absl::StatusOr<std::shared_ptr<RequestHandle>> Engine::Submit(RequestSpec spec) {
  MCSERVE_RETURN_IF_ERROR(CheckRequest(spec, limits_));
  MCSERVE_ASSIGN_OR_RETURN(Sampler sampler, Sampler::Create(spec.sampling, limits_.vocab_size));
  sampler.SetPrompt(spec.prompt);
  MCSERVE_ASSIGN_OR_RETURN(OutputStream stream,
                           OutputStream::Create(tokenizer_, spec.stop, tokenizer_->eos_id(), spec.prompt));
  const uint64_t id = next_id_.fetch_add(1);
  auto channel = std::make_shared<OutputChannel>(static_cast<size_t>(options_.channel_capacity), waker_);
  auto request = std::make_unique<Request>(id, std::move(spec), channel, std::move(sampler), std::move(stream));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return absl::UnavailableError("the engine is shutting down");
    if (static_cast<int64_t>(waiting_.size()) >= options_.max_waiting) {
      return absl::ResourceExhaustedError(absl::StrCat("the waiting queue is full (max_waiting = ",
                                                       options_.max_waiting, " requests); retry later"));
    }
    waiting_.push_back(std::move(request));
    live_[id] = channel;
  }
  waker_->Notify();
  return std::make_shared<RequestHandle>(id, std::move(channel));
}

absl::Status Engine::Abort(uint64_t id) {
  std::shared_ptr<OutputChannel> channel;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(id);
    if (it != live_.end()) channel = it->second.lock();
  }
  if (channel == nullptr) return absl::NotFoundError(absl::StrCat("no queued or running request with id ", id));
  channel->Cancel();
  return absl::OkStatus();
}

void Engine::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  waker_->Notify();
  if (thread_.joinable()) thread_.join();
}

EngineStats Engine::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  EngineStats s = stats_;
  s.waiting = static_cast<int64_t>(waiting_.size());
  return s;
}

void Engine::PublishStats() {
  EngineStats s = counters_;
  s.slots_used = num_slots_ - runner_->num_free_slots();
  s.running = std::count_if(running_.begin(), running_.end(),
                            [](const auto& r) { return r->phase != RequestPhase::kDone; });
  s.runner = runner_->stats();
  s.steps = step_;
  std::lock_guard<std::mutex> lock(mu_);
  stats_ = s;
}

}  // namespace mcserve::engine
