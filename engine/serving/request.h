// A generation request: what a client submits (RequestSpec), the state the engine's loop keeps for it
// (Request), and the client's side of it (RequestHandle: its output stream and cancellation).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/sampling/output_stream.h"
#include "engine/sampling/sampler.h"
#include "engine/serving/output_channel.h"

namespace mcserve::engine {

// What a client asks for: prompt ids (already tokenized, off the engine loop thread), sampling and
// stop rules. A plain value; any thread.
struct RequestSpec {
  std::vector<int32_t> prompt;  // [prompt_len] token ids, ≥ 1, each in [0, vocab)
  SamplingParams sampling;
  StopCriteria stop;
  std::string client_id;        // optional caller label (logs, the server's id mapping); not unique
  // vLLM's prompt_logprobs: also score the prompt; the first event carries log p(prompt[i] | prompt[<i])
  // (OutputEvent::prompt_logprobs). Costs the all-token logits of every prefill chunk.
  bool prompt_logprobs = false;
};

// A request's last event: `reason` (never kNone) and, for kError / a write timeout, why. Any thread.
OutputEvent FinalEvent(FinishReason reason, absl::Status error = absl::OkStatus());

// Where a request is in its life (kDone: finished, its slot released). Engine loop thread only.
enum class RequestPhase { kWaiting, kPrefill, kDecode, kDone };

// The engine's state for one request. Created by Engine::Submit (caller's thread), then owned
// and touched by the engine's loop thread only — except `channel`, which is thread-safe.
struct Request {
  uint64_t id = 0;
  RequestSpec spec;
  std::shared_ptr<OutputChannel> channel;
  Sampler sampler;
  OutputStream stream;

  RequestPhase phase = RequestPhase::kWaiting;
  int slot = -1;               // state slot while running (its position: ModelRunner::position)
  int64_t cached_tokens = 0;   // prompt tokens Begin resumed from the prefix cache
  bool first_event_sent = false;
  int32_t next_input = 0;      // the last sampled token: input of the next decode step
  std::vector<float> prompt_logprobs;  // collected while prefilling (spec.prompt_logprobs), sent first
  std::vector<float> last_row;  // [vocab] the previous prefill chunk's last-token logits (the same)
  int64_t last_scheduled = -1; // step number this request last ran in (decode fairness)
  // Latency bookkeeping (LatencyObserver): when Submit created it, and its latest token.
  std::chrono::steady_clock::time_point submitted = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_token;
  // Since when its output channel has been full (the client not reading); unset while it has room.
  std::optional<std::chrono::steady_clock::time_point> stalled_since;

  Request(uint64_t id, RequestSpec spec, std::shared_ptr<OutputChannel> channel, Sampler sampler,
          OutputStream stream)
      : id(id), spec(std::move(spec)), channel(std::move(channel)), sampler(std::move(sampler)),
        stream(std::move(stream)) {}
  int64_t prompt_len() const { return static_cast<int64_t>(spec.prompt.size()); }
};

// The client's side of a submitted request. Next: one consumer thread at a time; Abort and the
// destructor: any thread. Destroying the handle aborts the request (the client vanished); the
// handle may outlive the Engine.
class RequestHandle {
 public:
  RequestHandle(uint64_t id, std::shared_ptr<OutputChannel> channel) : id_(id), channel_(std::move(channel)) {}
  ~RequestHandle() {
    channel_->SetListener(nullptr);
    Abort();
  }
  RequestHandle(const RequestHandle&) = delete;
  RequestHandle& operator=(const RequestHandle&) = delete;

  // The engine-assigned id (unique per Engine), usable with Engine::Abort.
  uint64_t id() const { return id_; }
  // The next event; DEADLINE_EXCEEDED after `timeout` without one; OUT_OF_RANGE after the final event.
  absl::StatusOr<OutputEvent> Next(absl::Duration timeout) { return channel_->Next(timeout); }
  // The next event if one is queued now, else nullopt (see OutputChannel::TryNext).
  std::optional<OutputEvent> TryNext() { return channel_->TryNext(); }
  // Push-based consumption: `listener` runs on the engine loop thread whenever output arrives (see
  // OutputChannel::SetListener for its rules); null removes it. Any thread.
  void OnOutput(std::function<void()> listener) { channel_->SetListener(std::move(listener)); }
  // Asks the engine to stop the request at its next step boundary; the stream then ends with a
  // kCancelled event (unless it had already finished). Idempotent.
  void Abort() { channel_->Cancel(); }

 private:
  uint64_t id_;
  std::shared_ptr<OutputChannel> channel_;
};

}  // namespace mcserve::engine
