// GenerateReactor: one Generate stream on gRPC's callback API, for GenerationClient::GenerateAsync.
#pragma once

#include <functional>
#include <memory>
#include <optional>

#include <grpcpp/client_context.h>
#include <grpcpp/support/client_callback.h>

#include "absl/status/statusor.h"
#include "mcserve/v1/generation.grpc.pb.h"

namespace mcserve::client {

// Called with every GenerateResponse of a stream, in order: the first carries only the request id,
// the last carries `complete`.
using ChunkCallback = std::function<void(const v1::GenerateResponse&)>;
// Called once when a stream ends: its Completion, or its error.
using DoneCallback = std::function<void(absl::StatusOr<v1::Completion>)>;

// What a stream that ended with `status` returns: the status's error, else the completion it carried
// (UNKNOWN when it carried none). Any thread.
absl::StatusOr<v1::Completion> StreamResult(const grpc::Status& status, std::optional<v1::Completion> completion);

// Reads one stream without a thread of its own: gRPC's threads run on_chunk per response, then
// on_done once, never two at once. Deletes itself after on_done's result is taken, before calling it.
class GenerateReactor final : public grpc::ClientReadReactor<v1::GenerateResponse> {
 public:
  GenerateReactor(std::unique_ptr<grpc::ClientContext> context, const v1::GenerateRequest& request,
                  ChunkCallback on_chunk, DoneCallback on_done);

  // Starts the call on `stub` (which must outlive it). The caller's thread, once.
  void Start(v1::Generation::Stub& stub);

  // gRPC's reactions (gRPC threads).
  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  const std::unique_ptr<grpc::ClientContext> context_;
  const v1::GenerateRequest request_;
  const ChunkCallback on_chunk_;
  DoneCallback on_done_;
  v1::GenerateResponse response_;           // the read in flight
  std::optional<v1::Completion> completion_;
};

}  // namespace mcserve::client
