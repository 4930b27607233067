// Engine: the serving spine the gRPC / HTTP servers and the tools talk to. It owns the ModelRunner
// and one loop thread that is the runner's only caller (continuous batching; docs/architecture.md). Requests
// go in as token ids (tokenized by the caller) and come out through RequestHandles.
//
// Each step the loop builds one batch within `max_batch_tokens` (engine_batch.cc): first one decode
// token for every running request whose output channel has room (backpressure: a full channel skips
// the request this step), then prefill chunks in FCFS order, admitting waiting requests (FCFS,
// engine_admission.cc) while the runner has a free slot and Begin finds room. A prefill chunk ends on
// a multiple of boundary_tokens() (absolute prompt position) whenever one fits (the runner snapshots
// state at the block ends inside a chunk itself); the last chunk yields the first token. Cancellation
// is seen at step boundaries (engine_loop.cc). Every public method is thread-safe unless noted.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/model/tokenizer.h"
#include "engine/serving/latency_observer.h"
#include "engine/serving/model_runner.h"
#include "engine/serving/output_channel.h"
#include "engine/serving/request.h"
#include "engine/serving/request_rules.h"

namespace mcserve::engine {

// Engine settings (plain value); every limit is also a server flag.
struct EngineOptions {
  int max_waiting = 256;                // --max-waiting: queued requests before RESOURCE_EXHAUSTED
  int64_t max_batch_tokens = 2048;      // --max-batch-tokens: tokens per step (decodes + prefill), ≥ slots
  int64_t max_prompt_tokens = 1 << 20;  // --max-prompt-tokens: longest prompt accepted
  // --max-tokens-limit (the server's default: 4096): largest max_tokens (and min_tokens) accepted.
  int32_t max_tokens_limit = std::numeric_limits<int32_t>::max();
  int channel_capacity = 64;            // output events buffered per request (backpressure beyond)
  // When true, a prefill chunk never crosses a boundary_tokens() multiple without ending there (at
  // most one block per sequence per step). Off by default: a chunk is rounded down to the last
  // boundary that fits, and the runner splits its forward passes at the block ends it snapshots
  // (RecurrentRunner::Step), so prefix caching works either way with fewer steps.
  bool stop_at_every_boundary = false;
  // Receives every request's latencies (null: none). Must outlive the Engine.
  LatencyObserver* latency_observer = nullptr;
  // --write-timeout-seconds: a running request whose output channel has stayed full this long (its
  // client stopped reading) is cancelled and its slot freed; its final event is kCancelled with a
  // DEADLINE_EXCEEDED error. Zero or infinite: never.
  absl::Duration write_timeout = absl::Seconds(60);
};

// A snapshot of the engine's gauges and counters, for /metrics and GetServerInfo. Plain value.
struct EngineStats {
  int slots_total = 0;  // = the effective concurrency cap
  int slots_used = 0;
  int64_t waiting = 0;  // queued, not admitted
  int64_t running = 0;  // admitted (prefilling or decoding), slot held
  RunnerStats runner;   // as of the last step or finish
  int64_t steps = 0;
  int64_t tokens_generated = 0;
  int64_t prompt_tokens_processed = 0;  // prompt tokens run through the model (cached ones excluded)
  int64_t prompt_tokens_cached = 0;     // prompt tokens Begin resumed from the prefix cache
  int64_t write_timeouts = 0;  // requests cancelled because their client stopped reading (write_timeout)
  // Requests finished, indexed by FinishReason (kLength, kStop, kCancelled, kError).
  std::array<int64_t, 5> finished{};
  int64_t finished_by(FinishReason r) const { return finished[static_cast<int>(r)]; }
};

class Engine {
 public:
  // Validates the options against the runner (max_batch_tokens ≥ its slots, so every running request
  // can decode each step), takes the runner and starts the loop thread. `tokenizer` must outlive the
  // Engine. InvalidArgument naming the bad option. Any thread.
  static absl::StatusOr<std::unique_ptr<Engine>> Create(std::unique_ptr<ModelRunner> runner,
                                                        const Tokenizer* tokenizer, EngineOptions options);
  // Shutdown().
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request. InvalidArgument naming the field for anything that breaks the request rules
  // (CheckRequest against limits()) or the sampler's and output stream's own checks;
  // RESOURCE_EXHAUSTED when max_waiting requests are already queued; UNAVAILABLE after Shutdown.
  // Any thread.
  absl::StatusOr<std::shared_ptr<RequestHandle>> Submit(RequestSpec spec);
  // Cancels request `id` at the next step boundary (its stream ends with kCancelled). NOT_FOUND if
  // it is unknown or already finished. Any thread.
  absl::Status Abort(uint64_t id);
  // Cancels every queued and running request (each stream gets its kCancelled event), ends their
  // sequences and joins the loop thread. Idempotent; later Submits fail with UNAVAILABLE. Any thread
  // but the loop's.
  void Shutdown();
  // The latest snapshot of slots, queue, runner counters and totals. Any thread.
  EngineStats Stats() const;
  // The most requests that run at once (= state slots). Reported so users see the cap rather than
  // discovering it as queueing (vLLM / SGLang users' complaint). Any thread.
  int EffectiveConcurrency() const { return num_slots_; }
  // The limits Submit checks every request against (CheckRequest): the one set of rules both front
  // ends report. Any thread.
  const RequestLimits& limits() const { return limits_; }

 private:
  // One step's batch: chunks[i] (to the runner) belongs to requests[i]; chunk tokens point into the
  // request (its prompt or next_input).
  struct StepPlan {
    std::vector<SequenceChunk> chunks;
    std::vector<Request*> requests;
    bool empty() const { return chunks.empty(); }
  };

  Engine(std::unique_ptr<ModelRunner> runner, const Tokenizer* tokenizer, EngineOptions options);

  // engine_loop.cc (loop thread).
  void Loop();
  // Finishes cancelled requests, running and waiting.
  void ReapCancelled();
  // Cancels running requests whose output channel has been full for options_.write_timeout.
  void ReapStalled();
  // Runs the plan through the runner and hands each request its logits.
  void RunStep(const StepPlan& plan);
  // Adds a prefill chunk's prompt log-probs (`scored`: all but its first token, from the runner) to
  // r's; `last` [vocab] is the chunk's last-token row, which scores the next chunk's first token.
  static void CollectPromptLogprobs(Request* r, const SequenceChunk& chunk, std::span<const float> scored,
                                    std::span<const float> last);
  // Samples r's next token from `logits` [vocab] (the last row of its chunk) and sends its event.
  void EmitToken(Request* r, std::span<const float> logits);
  // Ends r's sequence (if running), releases its slot, publishes stats and sends the final event.
  void Finish(Request* r, OutputEvent final_event);
  // Reports r's new token (time to first token or inter-token latency) to the latency observer.
  void ObserveToken(Request* r);
  void PublishStats();
  void CancelAll();

  // engine_batch.cc (loop thread): this step's batch (admitting waiting requests);
  // *admission_blocked when Begin said RESOURCE_EXHAUSTED for the head of the queue.
  StepPlan BuildBatch(bool* admission_blocked);
  // The end (absolute prompt position) of r's next prefill chunk within `budget` tokens.
  int64_t ChunkEnd(const Request& r, int64_t budget) const;

  // engine_admission.cc (loop thread): admits the head of the queue into a runner slot and returns
  // it; null if the head failed (it is finished with the error) or, with *stop set, when admission
  // must stop this step.
  Request* AdmitHead(bool* admission_blocked, bool* stop);

  std::unique_ptr<ModelRunner> runner_;
  const Tokenizer* tokenizer_;
  const EngineOptions options_;
  const int num_slots_;
  const int vocab_size_;
  const int64_t boundary_;
  const RequestLimits limits_;  // what Submit holds every request to (CheckRequest)
  const std::shared_ptr<LoopWaker> waker_ = std::make_shared<LoopWaker>();
  std::atomic<uint64_t> next_id_{1};

  // Shared with the submitting / stats threads.
  mutable std::mutex mu_;
  bool stopping_ = false;
  std::deque<std::unique_ptr<Request>> waiting_;
  absl::flat_hash_map<uint64_t, std::weak_ptr<OutputChannel>> live_;  // queued or running
  EngineStats stats_;

  // Loop thread only.
  std::vector<std::unique_ptr<Request>> running_;  // admission order
  EngineStats counters_;                           // counters accumulated by the thread
  int64_t step_ = 0;

  std::thread thread_;  // last: started after everything above exists, joined in Shutdown
};

}  // namespace mcserve::engine
