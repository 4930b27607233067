// Engine: the facade the gRPC / HTTP servers talk to. Owns the ModelRunner and the scheduler thread;
// requests go in as token ids (tokenized by the caller) and come out through RequestHandles.
// Every public method is thread-safe unless noted.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/model/tokenizer.h"
#include "engine/serving/model_runner.h"
#include "engine/serving/request.h"
#include "engine/serving/scheduler.h"

namespace mcserve::engine {

// Engine settings (plain value); every limit is also a server flag.
struct EngineOptions {
  int max_waiting = 256;                // --max-waiting: queued requests before RESOURCE_EXHAUSTED
  int64_t max_batch_tokens = 2048;      // --max-batch-tokens: tokens per step, ≥ the runner's slots
  int64_t max_prompt_tokens = 1 << 20;  // --max-prompt-tokens: longest prompt accepted
  int channel_capacity = 64;            // output events buffered per request (backpressure beyond)
  bool stop_at_every_boundary = false;  // see SchedulerOptions
  LatencyObserver* latency_observer = nullptr;  // see SchedulerOptions; must outlive the Engine
  absl::Duration write_timeout = absl::Seconds(60);  // --write-timeout-seconds: see SchedulerOptions
};

// Gauges and counters for /metrics and GetServerInfo (see SchedulerStats).
using EngineStats = SchedulerStats;

class Engine {
 public:
  // Takes the runner and starts the scheduler thread. `tokenizer` must outlive the Engine.
  // InvalidArgument naming the bad option.
  static absl::StatusOr<std::unique_ptr<Engine>> Create(std::unique_ptr<ModelRunner> runner,
                                                        const Tokenizer* tokenizer, EngineOptions options);
  // Shutdown().
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request; see Scheduler::Submit for the errors (bad input → INVALID_ARGUMENT naming it,
  // full queue → RESOURCE_EXHAUSTED naming max_waiting, after Shutdown → UNAVAILABLE).
  absl::StatusOr<std::shared_ptr<RequestHandle>> Submit(RequestSpec spec);
  // Cancels request `id` (the Abort RPC); NOT_FOUND if unknown or already finished.
  absl::Status Abort(uint64_t id);
  // Cancels everything in flight (each stream ends with kCancelled), joins the scheduler thread.
  // Idempotent; later Submits fail with UNAVAILABLE.
  void Shutdown();
  // A snapshot of slots, queue, runner counters and totals.
  EngineStats Stats() const;
  // The most requests that run at once (= state slots). Reported so users see the cap rather than
  // discovering it as queueing (vLLM / SGLang users' complaint).
  int EffectiveConcurrency() const;

 private:
  Engine() = default;
  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<Scheduler> scheduler_;  // declared after runner_: destroyed (joined) first
};

}  // namespace mcserve::engine
