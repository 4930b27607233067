// GenerationClient: a C++ client of mcserve.v1.Generation and grpc.health.v1.Health (blocking calls,
// and GenerateAsync for many streams without a thread each).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "clients/cpp/call_canceller.h"
#include "clients/cpp/client_options.h"
#include "clients/cpp/generate_reactor.h"
#include "mcserve/v1/generation.grpc.pb.h"

namespace mcserve::client {

// What grpc.health.v1.Health/Check answered.
enum class ServingStatus { kUnknown, kServing, kNotServing, kServiceUnknown };
// "SERVING", "NOT_SERVING", ... (the proto's names).
const char* ServingStatusName(ServingStatus status);

// One connection to a server. Every method but GenerateAsync blocks its caller; all may be called from
// any number of threads at once (the channel multiplexes them). Errors are the server's gRPC status as an
// absl::Status (INVALID_ARGUMENT naming the field, UNAUTHENTICATED, NOT_FOUND, UNAVAILABLE, ...).
class GenerationClient {
 public:
  // Connects lazily: INVALID_ARGUMENT only for unusable options (unreadable PEM file, ...).
  static absl::StatusOr<std::unique_ptr<GenerationClient>> Create(ClientOptions options);

  // Streams one request: `on_chunk` sees each response as it arrives, on the calling thread; returns
  // the final Completion (finish reason, token counts, server-side timings). `canceller` (optional) cancels it from another
  // thread, which ends it with CANCELLED. A stream that ends without a completion is UNKNOWN.
  absl::StatusOr<v1::Completion> Generate(const v1::GenerateRequest& request, const ChunkCallback& on_chunk,
                                          CallCanceller* canceller = nullptr);
  // Starts streaming one request and returns at once: `on_chunk` sees each response, then `on_done`
  // what Generate would return, all on gRPC's threads (one at a time per stream; they must not block).
  // The client must outlive the stream: wait for on_done before destroying it.
  void GenerateAsync(const v1::GenerateRequest& request, ChunkCallback on_chunk, DoneCallback on_done);
  // Aborts a request in flight by its id (the server's or the client's request_id); its stream ends
  // with FINISH_REASON_CANCELLED. NOT_FOUND when no such request is running or queued.
  absl::Status Abort(absl::string_view request_id);
  // The served model's token ids for `text` (with a BOS token first when add_bos).
  absl::StatusOr<std::vector<int32_t>> Tokenize(absl::string_view text, bool add_bos);
  // The served model and the server's capacity.
  absl::StatusOr<v1::ModelInfo> GetModelInfo();
  // Version, uptime and the engine's counters.
  absl::StatusOr<v1::ServerInfo> GetServerInfo();
  // grpc.health.v1.Health/Check of `service` ("" = the whole server); needs no API key.
  absl::StatusOr<ServingStatus> Health(absl::string_view service = "");

  const ClientOptions& options() const { return options_; }

 private:
  GenerationClient(ClientOptions options, std::shared_ptr<grpc::Channel> channel);
  // A context with the API key metadata and the deadline of options_.timeout.
  std::unique_ptr<grpc::ClientContext> NewContext() const;

  const ClientOptions options_;
  const std::shared_ptr<grpc::Channel> channel_;
  const std::unique_ptr<v1::Generation::Stub> stub_;
};

}  // namespace mcserve::client
