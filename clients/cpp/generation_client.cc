#include "clients/cpp/generation_client.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "clients/cpp/channel.h"
#include "clients/cpp/grpc_status.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace mcserve::client {
namespace {

using HealthResponse = grpc::health::v1::HealthCheckResponse;

ServingStatus FromProto(HealthResponse::ServingStatus status) {
  switch (status) {
    case HealthResponse::SERVING: return ServingStatus::kServing;
    case HealthResponse::NOT_SERVING: return ServingStatus::kNotServing;
    case HealthResponse::SERVICE_UNKNOWN: return ServingStatus::kServiceUnknown;
    default: return ServingStatus::kUnknown;
  }
}

// Detaches a canceller from a call when the call ends, however it ends.
class AttachedCanceller {
 public:
  explicit AttachedCanceller(CallCanceller* canceller) : canceller_(canceller) {}
  ~AttachedCanceller() {
    if (canceller_ != nullptr) canceller_->Detach();
  }
  AttachedCanceller(const AttachedCanceller&) = delete;
  AttachedCanceller& operator=(const AttachedCanceller&) = delete;

 private:
  CallCanceller* const canceller_;
};

}  // namespace

const char* ServingStatusName(ServingStatus status) {
  switch (status) {
    case ServingStatus::kServing: return "SERVING";
    case ServingStatus::kNotServing: return "NOT_SERVING";
    case ServingStatus::kServiceUnknown: return "SERVICE_UNKNOWN";
    case ServingStatus::kUnknown: break;
  }
  return "UNKNOWN";
}

absl::StatusOr<std::unique_ptr<GenerationClient>> GenerationClient::Create(ClientOptions options) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = CreateChannel(options);
  if (!channel.ok()) return channel.status();
  return std::unique_ptr<GenerationClient>(new GenerationClient(std::move(options), *std::move(channel)));
}

GenerationClient::GenerationClient(ClientOptions options, std::shared_ptr<grpc::Channel> channel)
    : options_(std::move(options)), channel_(std::move(channel)), stub_(v1::Generation::NewStub(channel_)) {}

std::unique_ptr<grpc::ClientContext> GenerationClient::NewContext() const {
  auto context = std::make_unique<grpc::ClientContext>();
  if (!options_.api_key.empty()) context->AddMetadata("authorization", absl::StrCat("Bearer ", options_.api_key));
  if (options_.timeout != absl::InfiniteDuration()) {
    context->set_deadline(absl::ToChronoTime(absl::Now() + options_.timeout));
  }
  return context;
}

absl::StatusOr<v1::Completion> GenerationClient::Generate(const v1::GenerateRequest& request,
                                                          const ChunkCallback& on_chunk, CallCanceller* canceller) {
  std::unique_ptr<grpc::ClientContext> context = NewContext();
  if (canceller != nullptr && !canceller->Attach(context.get())) {
    return absl::CancelledError("cancelled before the call started");
  }
  AttachedCanceller attached(canceller);
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader = stub_->Generate(context.get(), request);
  v1::GenerateResponse response;
  std::optional<v1::Completion> completion;
  while (reader->Read(&response)) {
    if (on_chunk) on_chunk(response);
    if (response.has_complete()) completion = response.complete();
  }
  return StreamResult(reader->Finish(), std::move(completion));
}

void GenerationClient::GenerateAsync(const v1::GenerateRequest& request, ChunkCallback on_chunk, DoneCallback on_done) {
  (new GenerateReactor(NewContext(), request, std::move(on_chunk), std::move(on_done)))->Start(*stub_);
}

absl::Status GenerationClient::Abort(absl::string_view request_id) {
  std::unique_ptr<grpc::ClientContext> context = NewContext();
  v1::AbortRequest request;
  request.set_request_id(std::string(request_id));
  v1::AbortResponse response;
  return FromGrpcStatus(stub_->Abort(context.get(), request, &response));
}

absl::StatusOr<std::vector<int32_t>> GenerationClient::Tokenize(absl::string_view text, bool add_bos) {
  std::unique_ptr<grpc::ClientContext> context = NewContext();
  v1::TokenizeRequest request;
  request.set_text(std::string(text));
  request.set_add_bos(add_bos);
  v1::TokenizeResponse response;
  if (absl::Status s = FromGrpcStatus(stub_->Tokenize(context.get(), request, &response)); !s.ok()) return s;
  return std::vector<int32_t>(response.token_ids().begin(), response.token_ids().end());
}

absl::StatusOr<v1::ModelInfo> GenerationClient::GetModelInfo() {
  std::unique_ptr<grpc::ClientContext> context = NewContext();
  v1::ModelInfo response;
  if (absl::Status s = FromGrpcStatus(stub_->GetModelInfo(context.get(), {}, &response)); !s.ok()) return s;
  return response;
}

absl::StatusOr<v1::ServerInfo> GenerationClient::GetServerInfo() {
  std::unique_ptr<grpc::ClientContext> context = NewContext();
  v1::ServerInfo response;
  if (absl::Status s = FromGrpcStatus(stub_->GetServerInfo(context.get(), {}, &response)); !s.ok()) return s;
  return response;
}

absl::StatusOr<ServingStatus> GenerationClient::Health(absl::string_view service) {
  std::unique_ptr<grpc::ClientContext> context = NewContext();
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(std::string(service));
  HealthResponse response;
  const grpc::Status status = grpc::health::v1::Health::NewStub(channel_)->Check(context.get(), request, &response);
  if (absl::Status s = FromGrpcStatus(status); !s.ok()) return s;
  return FromProto(response.status());
}

}  // namespace mcserve::client
