// GenerationService: mcserve.v1.Generation on gRPC's callback API, in front of an engine::Engine.
//
// Threading. gRPC's threads only validate, tokenize, Submit (never blocking) and run reactor
// callbacks. Each Generate stream owns one small "pump" thread: OutputChannel offers only a blocking
// Next(timeout), so the pump waits on it (100 ms slices, checking for cancellation), coalesces the
// events already queued into one response, and starts the next write only after the previous one
// completed (OnWriteDone) — one write in flight, so a client that stops reading stops the pump, the
// channel fills and the scheduler stops decoding for it (backpressure). The number of pumps is
// bounded by the engine's slots + --max-waiting (Submit refuses beyond). A cancelled call (client
// gone, deadline passed) aborts the request in OnCancel; Abort(request_id) aborts by id.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "engine/runner/model.h"
#include "engine/serving/engine.h"
#include "mcserve/v1/generation.grpc.pb.h"

namespace mcserve::server {

// Settings of the service (plain value); each is a server flag.
struct GenerationServiceOptions {
  std::string model_path;          // reported by GetModelInfo
  uint32_t max_tokens_limit = 4096;  // --max-tokens-limit: the largest max_tokens accepted
  int64_t max_prompt_tokens = 1 << 20;  // --max-prompt-tokens (reported; the engine enforces it)
  std::string api_key;             // --api-key: "" = no authentication
  std::string version;             // reported by GetServerInfo
  size_t max_request_bytes = 4 << 20;  // --max-request-bytes: larger Generate requests → INVALID_ARGUMENT
};

// absl → gRPC status (the codes share their numbering).
grpc::Status ToGrpcStatus(const absl::Status& status);

// Generate is registered raw (grpc::ByteBuffer) and decoded by DecodeRequest, so that an oversized
// message or a prompt that is not UTF-8 gets INVALID_ARGUMENT naming the field.
class GenerationService final
    : public mcserve::v1::Generation::WithRawCallbackMethod_Generate<mcserve::v1::Generation::CallbackService> {
 public:
  // `engine` and `model` must outlive the service (and the grpc::Server it is registered with).
  GenerationService(engine::Engine* engine, const engine::Model* model, GenerationServiceOptions options);
  ~GenerationService() override;

  // Refuses new Generate calls with UNAVAILABLE (graceful shutdown). Any thread.
  void StopAdmitting() { admitting_ = false; }
  // Generate streams in flight. Any thread.
  int active_streams() const { return active_streams_.load(); }

  grpc::ServerWriteReactor<grpc::ByteBuffer>* Generate(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* raw_request) override;
  grpc::ServerUnaryReactor* Abort(grpc::CallbackServerContext* context, const v1::AbortRequest* request,
                                  v1::AbortResponse* response) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* context, const v1::TokenizeRequest* request,
                                     v1::TokenizeResponse* response) override;
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* context,
                                         const v1::GetModelInfoRequest* request, v1::ModelInfo* response) override;
  grpc::ServerUnaryReactor* GetServerInfo(grpc::CallbackServerContext* context,
                                          const v1::GetServerInfoRequest* request, v1::ServerInfo* response) override;

 private:
  class GenerateReactor;

  // OK, or UNAUTHENTICATED when an API key is set and the `authorization: Bearer KEY` metadata
  // is missing or wrong. gRPC threads.
  grpc::Status Authenticate(const grpc::CallbackServerContext* context) const;
  // Validates and tokenizes the request into a spec; INVALID_ARGUMENT naming the field.
  absl::StatusOr<engine::RequestSpec> BuildSpec(const v1::GenerateRequest& request) const;
  // The request-id registry (for Abort by id). Register fails with ALREADY_EXISTS for an id in use.
  absl::Status Register(const std::string& request_id, uint64_t engine_id);
  void Unregister(const std::string& request_id);
  // Runner counters as a CheckpointStats message.
  void FillCheckpointStats(const engine::RunnerStats& stats, v1::CheckpointStats* out) const;

  engine::Engine* engine_;
  const engine::Model* model_;
  const GenerationServiceOptions options_;
  const absl::Time started_;
  std::atomic<bool> admitting_{true};
  std::atomic<int> active_streams_{0};
  std::atomic<uint64_t> next_anonymous_{0};
  std::mutex mu_;
  std::map<std::string, uint64_t> ids_;  // request id → engine id, while the stream runs
};

}  // namespace mcserve::server
