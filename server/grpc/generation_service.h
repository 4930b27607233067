// GenerationService: mcserve.v1.Generation on gRPC's callback API, in front of an engine::Engine.
//
// Every method is registered raw (grpc::ByteBuffer) and decoded by DecodeRequest, so that malformed
// bytes, an oversized message or a string that is not UTF-8 get INVALID_ARGUMENT naming the field.
// gRPC's threads only authenticate, validate, tokenize (bounded by --max-prompt-tokens) and Submit
// (never blocking); each Generate stream is then pushed by the engine (generate_stream.h), with no
// thread of its own. Requests are owned by their caller (request_registry.h): Abort(request_id)
// reaches only what the caller may abort.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/runner/model.h"
#include "engine/serving/engine.h"
#include "mcserve/v1/generation.grpc.pb.h"
#include "server/common/api_keys.h"
#include "server/common/caller_accounting.h"
#include "server/grpc/caller_identity.h"
#include "server/grpc/generate_stream.h"
#include "server/grpc/request_registry.h"

namespace mcserve::server {

// Settings of the service (plain value); most are server flags.
struct GenerationServiceOptions {
  std::string model_path;                // reported by GetModelInfo
  ApiKeys api_keys;                      // --api-key: none = no authentication
  CallerAccounting* accounting = nullptr;  // per-caller counts (may be null; must outlive the service)
  std::string version;                   // reported by GetServerInfo
  size_t max_request_bytes = 4 << 20;    // --max-request-bytes: larger requests → INVALID_ARGUMENT
  absl::Duration write_timeout = absl::Seconds(60);  // the engine's --write-timeout-seconds
};

// Generation with every method raw.
using RawGenerationService = v1::Generation::WithRawCallbackMethod_Generate<
    v1::Generation::WithRawCallbackMethod_Abort<v1::Generation::WithRawCallbackMethod_Tokenize<
        v1::Generation::WithRawCallbackMethod_GetModelInfo<
            v1::Generation::WithRawCallbackMethod_GetServerInfo<v1::Generation::Service>>>>>;

class GenerationService final : public RawGenerationService {
 public:
  // `engine` and `model` must outlive the service (and the grpc::Server it is registered with).
  GenerationService(engine::Engine* engine, const engine::Model* model, GenerationServiceOptions options);
  ~GenerationService() override;

  // Refuses new Generate calls with UNAVAILABLE (graceful shutdown). Any thread.
  void StopAdmitting() { admitting_ = false; }
  // Generate streams in flight. Any thread.
  int active_streams() const { return active_streams_.load(); }

  // gRPC's handlers (gRPC threads).
  grpc::ServerWriteReactor<grpc::ByteBuffer>* Generate(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* raw_request) override;
  grpc::ServerUnaryReactor* Abort(grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request,
                                  grpc::ByteBuffer* raw_response) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request,
                                     grpc::ByteBuffer* raw_response) override;
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request,
                                         grpc::ByteBuffer* raw_response) override;
  grpc::ServerUnaryReactor* GetServerInfo(grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request,
                                          grpc::ByteBuffer* raw_response) override;

 private:
  // Authenticates the call, decodes `raw_request` as a Request, runs `handler(caller, request,
  // &response)` and answers its status (and the encoded response when OK).
  template <class Request, class Response, class Handler>
  grpc::ServerUnaryReactor* Unary(grpc::CallbackServerContext* context, const grpc::ByteBuffer& raw_request,
                                  grpc::ByteBuffer* raw_response, Handler handler);
  // The typed unary methods.
  absl::Status AbortById(const Caller& caller, const v1::AbortRequest& request) const;
  absl::Status TokenizeText(const v1::TokenizeRequest& request, v1::TokenizeResponse* response) const;
  void DescribeModel(v1::ModelInfo* response) const;
  void DescribeServer(v1::ServerInfo* response) const;
  // The request as the engine's spec (text tokenized within --max-prompt-tokens); INVALID_ARGUMENT
  // naming the field. The engine checks the rest (Engine::Submit, CheckRequest).
  absl::StatusOr<engine::RequestSpec> BuildSpec(const v1::GenerateRequest& request) const;

  engine::Engine* engine_;
  const engine::Model* model_;
  const GenerationServiceOptions options_;
  const CallerAuthenticator authenticator_;
  const absl::Time started_;
  std::atomic<bool> admitting_{true};
  std::atomic<int> active_streams_{0};
  RequestRegistry registry_;
  GenerateStreamEnv stream_env_;
};

}  // namespace mcserve::server
