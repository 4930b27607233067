// OutputChannel: the bounded queue of one request's output events, from the engine loop thread
// (producer) to whoever streams the reply (consumer). The engine loop never blocks on it: a request
// whose channel is full is not scheduled for decode that step (backpressure), so a client that
// stops reading stops costing compute but keeps its state slot. Every stream ends with exactly one
// final event (finish reason set, or an error), after which Next reports OUT_OF_RANGE.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/sampling/output_stream.h"
#include "engine/sampling/sampler.h"

namespace mcserve::engine {

// One event of a request's stream. A token event has token_id ≥ 0; the final event has `finish` set
// (kLength / kStop may carry the last token; kCancelled and kError carry none; kError has `error`).
// Plain value.
struct OutputEvent {
  int32_t token_id = -1;                // -1: no token in this event
  std::string text;                     // text delta (may be empty: held-back UTF-8 bytes)
  float logprob = 0.0f;                 // log-probability of token_id under the sampling distribution
  std::vector<TokenLogprob> top;        // top-n alternatives when requested
  FinishReason finish = FinishReason::kNone;  // set on the final event only
  std::string stop;                     // the stop string matched, when finish is a stop string
  std::optional<int32_t> stop_token;    // the stop token id matched, when finish is a stop token
  int64_t cached_prompt_tokens = -1;    // set (≥ 0) on the first event: prompt tokens reused
  // First event only, when RequestSpec::prompt_logprobs: log p(prompt[i] | prompt[<i]) for
  // i = cached_prompt_tokens + 1 .. prompt_len − 1 (every i ≥ 1 without a prefix-cache hit).
  std::vector<float> prompt_logprobs;
  absl::Status error;                   // why the request failed (finish == kError)

  bool is_final() const { return finish != FinishReason::kNone; }
};

// Wakes the engine loop thread. Shared (shared_ptr) by the engine loop and every channel so that a
// consumer outliving the engine can still call Notify harmlessly. Thread-safe.
class LoopWaker {
 public:
  // Any thread: makes the next (or current) Wait return.
  void Notify();
  // Engine loop thread: blocks until Notify was called since the last Wait, or `timeout` passes;
  // true if notified.
  bool Wait(absl::Duration timeout);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool pending_ = false;
};

// Thread-safe; the producer methods are for the engine loop thread, the consumer methods for one
// consumer thread at a time (Cancel: any thread).
class OutputChannel {
 public:
  // `capacity` ≥ 1 token events buffered at most (the final event may exceed it by one).
  OutputChannel(size_t capacity, std::shared_ptr<LoopWaker> waker);

  // Producer: whether one more non-final event fits (the engine loop checks before scheduling work
  // that produces a token, so Push never fails for want of room).
  bool HasRoom() const;
  // Producer: appends a non-final event and wakes the consumer; false (event dropped) if full or
  // already closed.
  bool Push(OutputEvent event);
  // Producer: Push without waking the consumer. A producer that pushes to many channels at once (the
  // engine loop, one event per request per step) calls WakeConsumer on each afterwards, so that a
  // consumer thread woken by the first does not run, and sleep again, between the producer's pushes.
  bool PushQuietly(OutputEvent event);
  // Producer: wakes the consumer (a blocked Next, the listener) if events pushed quietly since the
  // last wake are waiting; otherwise does nothing.
  void WakeConsumer();
  // Producer: appends the final event regardless of capacity and closes the channel; no-op if
  // already closed.
  void Finish(OutputEvent event);
  bool closed() const;

  // Any thread: the client is gone or asked to stop. The engine loop sees it at its next step
  // boundary, releases the request and finishes the stream with FinishReason::kCancelled.
  void Cancel();
  bool cancelled() const;

  // Consumer: the next event; DEADLINE_EXCEEDED if none arrives within `timeout`; OUT_OF_RANGE once
  // the final event has been returned.
  absl::StatusOr<OutputEvent> Next(absl::Duration timeout);
  // Consumer: the next event if one is queued now, else nullopt (never blocks). After the final
  // event has been returned it stays nullopt.
  std::optional<OutputEvent> TryNext();
  // Any thread: push-based consumption. `listener` runs after every Push and Finish (on the
  // producer's thread, without the channel's lock held), and once right away when events are already
  // queued. It must be short and must not block (post to an event loop, start a write). Replaces the
  // previous listener; null removes it. Returns only when no call of the old listener is running, so
  // a consumer may free what its listener captured after SetListener(nullptr) — as long as the caller
  // holds no lock the listener takes.
  void SetListener(std::function<void()> listener);
  // Events buffered now.
  size_t size() const;

 private:
  const size_t capacity_;
  std::shared_ptr<LoopWaker> waker_;
  // Takes an event out (mu_ held); the engine loop is woken when this made room in a full channel.
  OutputEvent PopLocked(bool* was_full);
  void NotifyListener();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::mutex listener_mu_;  // held while the listener runs and while it is replaced
  std::function<void()> listener_;
  std::deque<OutputEvent> events_;
  bool closed_ = false;     // the final event was pushed
  bool unannounced_ = false;  // PushQuietly added events the consumer was not woken for
  bool cancelled_ = false;  // the consumer gave up
};

}  // namespace mcserve::engine
