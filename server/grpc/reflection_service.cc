#include "server/grpc/reflection_service.h"

#include <utility>

#include "grpc/reflection/v1/reflection.grpc.pb.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "server/grpc/caller_identity.h"
#include "server/grpc/proto_convert.h"
#include "server/grpc/reflection_answers.h"
#include "server/grpc/request_decoder.h"

namespace mcserve::server {
namespace {

// What every reflection stream reads (owned by the services; outlives every stream).
struct ReflectionShared {
  ReflectionAnswers answers;
  CallerAuthenticator authenticator;
  size_t max_request_bytes;
};

// One ServerReflectionInfo stream: one read or one write in flight, each request answered in order.
class ReflectionStream final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  ReflectionStream(grpc::CallbackServerContext* context, const ReflectionShared& shared) : shared_(shared) {
    if (absl::StatusOr<Caller> caller = shared_.authenticator.Identify(*context); !caller.ok()) {
      Finish(ToGrpcStatus(caller.status()));
      return;
    }
    StartRead(&in_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) return Finish(grpc::Status::OK);  // the client finished writing
    grpc::reflection::v1::ServerReflectionRequest request;
    if (absl::Status s = DecodeRequest(in_, shared_.max_request_bytes, &request); !s.ok()) {
      return Finish(ToGrpcStatus(s));
    }
    EncodeResponse(shared_.answers.Answer(request), &out_);
    StartWrite(&out_);
  }

  void OnWriteDone(bool ok) override {
    if (!ok) return Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the call was cancelled"));
    StartRead(&in_);
  }

  void OnDone() override { delete this; }

 private:
  const ReflectionShared& shared_;
  grpc::ByteBuffer in_;
  grpc::ByteBuffer out_;
};

// ServerReflectionInfo of `Generated` (the v1 or v1alpha service), raw.
template <class Generated>
class RawReflectionService final
    : public Generated::template WithRawCallbackMethod_ServerReflectionInfo<typename Generated::Service> {
 public:
  explicit RawReflectionService(const ReflectionShared* shared) : shared_(shared) {}

  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* ServerReflectionInfo(
      grpc::CallbackServerContext* context) override {
    return new ReflectionStream(context, *shared_);
  }

 private:
  const ReflectionShared* shared_;
};

class ReflectionServicesImpl final : public ReflectionServices {
 public:
  explicit ReflectionServicesImpl(ReflectionShared shared)
      : shared_(std::move(shared)), v1_(&shared_), v1alpha_(&shared_) {}

  std::vector<grpc::Service*> services() override { return {&v1_, &v1alpha_}; }

 private:
  const ReflectionShared shared_;
  RawReflectionService<grpc::reflection::v1::ServerReflection> v1_;
  RawReflectionService<grpc::reflection::v1alpha::ServerReflection> v1alpha_;
};

}  // namespace

std::vector<std::string> ReflectionServices::Names() {
  return {grpc::reflection::v1::ServerReflection::service_full_name(),
          grpc::reflection::v1alpha::ServerReflection::service_full_name()};
}

absl::StatusOr<std::unique_ptr<ReflectionServices>> ReflectionServices::Create(ReflectionOptions options) {
  // Refers to v1alpha's messages (answered as v1) so that their object file, and with it the file's
  // descriptor, is linked from the static library.
  if (grpc::reflection::v1alpha::ServerReflectionRequest::descriptor() == nullptr) {
    return absl::InternalError("reflection: no descriptor for grpc.reflection.v1alpha");
  }
  std::vector<std::string> listed = std::move(options.services);
  for (std::string& name : Names()) listed.push_back(std::move(name));
  absl::StatusOr<ReflectionAnswers> answers = ReflectionAnswers::Create(std::move(listed));
  if (!answers.ok()) return answers.status();
  return std::make_unique<ReflectionServicesImpl>(ReflectionShared{
      *std::move(answers), CallerAuthenticator(std::move(options.api_keys), options.accounting),
      options.max_request_bytes});
}

}  // namespace mcserve::server
