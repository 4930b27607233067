#include "clients/cpp/generate_reactor.h"

#include <utility>

#include "clients/cpp/grpc_status.h"

namespace mcserve::client {

absl::StatusOr<v1::Completion> StreamResult(const grpc::Status& status, std::optional<v1::Completion> completion) {
  if (!status.ok()) return FromGrpcStatus(status);
  if (!completion.has_value()) return absl::UnknownError("the stream ended without a completion");
  return *std::move(completion);
}

GenerateReactor::GenerateReactor(std::unique_ptr<grpc::ClientContext> context, const v1::GenerateRequest& request,
                                 ChunkCallback on_chunk, DoneCallback on_done)
    : context_(std::move(context)), request_(request), on_chunk_(std::move(on_chunk)), on_done_(std::move(on_done)) {}

void GenerateReactor::Start(v1::Generation::Stub& stub) {
  stub.async()->Generate(context_.get(), &request_, this);
  StartRead(&response_);
  StartCall();
}

void GenerateReactor::OnReadDone(bool ok) {
  if (!ok) return;  // the stream ended: OnDone follows
  if (on_chunk_) on_chunk_(response_);
  if (response_.has_complete()) completion_ = response_.complete();
  StartRead(&response_);
}

void GenerateReactor::OnDone(const grpc::Status& status) {
  DoneCallback on_done = std::move(on_done_);
  absl::StatusOr<v1::Completion> result = StreamResult(status, std::move(completion_));
  delete this;  // before on_done, which may let its caller tear the client down
  if (on_done) on_done(std::move(result));
}

}  // namespace mcserve::client
