// GenerateStream: one Generate call's reactor, pushed by the engine (no thread per stream).
//
// The engine calls the request's output listener on its loop thread whenever it queues an
// event. When no write is in flight the listener takes up to kMaxEventsPerResponse queued events
// (RequestHandle::TryNext), coalesces them into one response and starts its write; otherwise it only
// notes that output is pending, and OnWriteDone (a gRPC thread) continues. One write in flight at a
// time: a client that stops reading stops the draining, its output channel fills and the engine loop
// stops decoding for it (backpressure) until its write timeout, when the engine cancels the request
// (final event kCancelled with a DEADLINE_EXCEEDED error). A write still stuck when output arrives
// after the write timeout has passed gets the call cancelled (TryCancel), so nothing is held. A
// cancelled call (client gone, deadline) aborts the request in OnCancel. The final response (its
// Completion reads Engine::Stats) is never built on the engine loop thread: a final event found there is
// handed to a gRPC thread (a callback Alarm) first.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <grpcpp/alarm.h>
#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "engine/serving/engine.h"
#include "mcserve/v1/generation.pb.h"
#include "server/common/caller_accounting.h"
#include "server/grpc/caller_identity.h"
#include "server/grpc/request_registry.h"

namespace mcserve::server {

// What every stream shares with its service; everything pointed to outlives the streams.
struct GenerateStreamEnv {
  engine::Engine* engine = nullptr;         // checkpoint statistics for the Completion
  RequestRegistry* registry = nullptr;      // the stream releases its id when done
  CallerAccounting* accounting = nullptr;   // may be null
  std::atomic<int>* active_streams = nullptr;
  absl::Duration write_timeout = absl::Seconds(60);  // the engine's; zero or infinite: none
};

// One stream's request. Plain value.
struct GenerateStreamRequest {
  std::shared_ptr<engine::RequestHandle> handle;
  std::string request_id;  // reserved in env.registry by `caller.owner`
  Caller caller;
  int64_t prompt_tokens = 0;
  bool want_logprobs = false;
  absl::Time start;        // when the call arrived
};

class GenerateStream final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  // Responses coalesce at most this many engine events.
  static constexpr int kMaxEventsPerResponse = 64;

  // Starts the stream: writes the first response (the request id, so that the client can abort
  // during prefill) and listens to the engine. Deletes itself in OnDone. The gRPC handler's thread.
  GenerateStream(grpc::CallbackServerContext* context, const GenerateStreamEnv& env, GenerateStreamRequest request);

  // gRPC's reactions (gRPC threads).
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  // What Collect found in the output channel.
  enum class Batch { kEmpty, kEvents, kFinal, kFailed };

  // The engine's output listener (engine loop thread).
  void OnOutput();
  // Drains, writes or finishes; the caller holds the write claim (claimed_). `on_loop`: called by
  // the engine's listener, so the final response is left to a gRPC thread (WriteFinal via hop_).
  void Flush(bool on_loop);
  // Moves up to kMaxEventsPerResponse queued events into response_ (the final one also into
  // final_event_, and failure_ for kFailed).
  Batch Collect();
  // Completes response_ from final_event_ and writes it, finishing the call. Not the engine loop thread.
  void WriteFinal();
  // Adds a token or text event to response_.
  void Append(const engine::OutputEvent& event);
  // Fills response_'s Completion from the final event (reads Engine::Stats).
  void Complete(const engine::OutputEvent& event);
  // Starts writing response_ (finishing the call after it when `last`).
  void Write(bool last);
  // Whether the write in flight has waited longer than the write timeout (mu_ held).
  bool WriteStuckLocked(std::chrono::steady_clock::time_point now) const;

  grpc::CallbackServerContext* const context_;
  const GenerateStreamEnv env_;
  const GenerateStreamRequest request_;

  // Touched only by the holder of the write claim (and by OnDone, after every claim).
  v1::GenerateResponse response_;
  grpc::ByteBuffer buffer_;  // response_ serialized: the write in flight
  int64_t generated_ = 0;
  int64_t cached_prompt_tokens_ = -1;
  absl::Time first_token_;
  engine::FinishReason finish_reason_ = engine::FinishReason::kCancelled;
  absl::Status failure_;
  std::optional<engine::OutputEvent> final_event_;
  grpc::Alarm hop_;  // moves WriteFinal from the engine loop thread to a gRPC thread

  std::mutex mu_;
  bool claimed_ = false;          // someone is building a response, or a write is in flight
  bool write_in_flight_ = false;
  std::chrono::steady_clock::time_point write_started_;
  bool output_pending_ = false;   // output arrived while claimed
  bool cancelled_ = false;        // OnCancel ran
  bool finished_ = false;         // Finish (or StartWriteAndFinish) was called
  bool cancel_requested_ = false; // TryCancel was called for a stuck write
};

}  // namespace mcserve::server
