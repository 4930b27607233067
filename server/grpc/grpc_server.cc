#include "server/grpc/grpc_server.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grpc/health/v1/health.pb.h"
#include "server/grpc/generation_service.h"
#include "server/grpc/reflection_service.h"

namespace mcserve::server {
namespace {

// TLS or plaintext credentials from the options; INVALID_ARGUMENT for an incomplete TLS setting.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> Credentials(const GrpcServerOptions& options) {
  if (options.tls_cert_pem.empty() && options.tls_key_pem.empty()) {
    if (!options.tls_client_ca_pem.empty()) return absl::InvalidArgumentError("--tls-client-ca needs --tls-cert and --tls-key");
    return grpc::InsecureServerCredentials();
  }
  if (options.tls_cert_pem.empty() || options.tls_key_pem.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  grpc::SslServerCredentialsOptions ssl;
  ssl.pem_key_cert_pairs.push_back({options.tls_key_pem, options.tls_cert_pem});
  if (!options.tls_client_ca_pem.empty()) {
    ssl.pem_root_certs = options.tls_client_ca_pem;
    ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(ssl);
}

GenerationServiceOptions ServiceOptions(const GrpcServerOptions& options) {
  GenerationServiceOptions service;
  service.model_path = options.model_path;
  service.api_keys = options.api_keys;
  service.accounting = options.accounting;
  service.version = options.version;
  service.max_request_bytes = options.max_request_bytes;
  service.write_timeout = options.write_timeout;
  return service;
}

class GrpcServerImpl : public GrpcServer {
 public:
  GrpcServerImpl(engine::Engine* engine, const engine::Model* model, const GrpcServerOptions& options)
      : service_(engine, model, ServiceOptions(options)) {}

  absl::Status Start(const GrpcServerOptions& options) {
    absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials = Credentials(options);
    if (!credentials.ok()) return credentials.status();
    // gRPC serves Health itself (without protobuf); health.proto is compiled in for reflection.
    grpc::EnableDefaultHealthCheckService(true);
    ReflectionOptions reflection_options;
    reflection_options.services = {v1::Generation::service_full_name(),
                                   grpc::health::v1::HealthCheckRequest::descriptor()->file()->service(0)->full_name()};
    reflection_options.api_keys = options.api_keys;
    reflection_options.accounting = options.accounting;
    reflection_options.max_request_bytes = options.max_request_bytes;
    absl::StatusOr<std::unique_ptr<ReflectionServices>> reflection = ReflectionServices::Create(reflection_options);
    if (!reflection.ok()) return reflection.status();
    reflection_ = *std::move(reflection);

    grpc::ServerBuilder builder;
    const std::string address = absl::StrContains(options.host, ':')
                                    ? absl::StrCat("[", options.host, "]:", options.port)
                                    : absl::StrCat(options.host, ":", options.port);
    builder.AddListeningPort(address, *credentials, &port_);
    builder.RegisterService(&service_);
    for (grpc::Service* service : reflection_->services()) builder.RegisterService(service);
    const size_t transport_limit = options.max_request_bytes * GrpcServerOptions::kTransportLimitFactor;
    builder.SetMaxReceiveMessageSize(static_cast<int>(std::min<size_t>(transport_limit, INT32_MAX)));
    server_ = builder.BuildAndStart();
    if (server_ == nullptr || port_ == 0) return absl::UnavailableError(absl::StrCat("cannot listen on ", address));
    return absl::OkStatus();
  }

  ~GrpcServerImpl() override { Shutdown(absl::ZeroDuration()); }

  int port() const override { return port_; }

  void StopAdmitting() override {
    service_.StopAdmitting();
    if (server_ != nullptr) server_->GetHealthCheckService()->SetServingStatus(false);
  }

  int active_streams() const override { return service_.active_streams(); }

  void Shutdown(absl::Duration grace) override {
    if (server_ == nullptr) return;
    StopAdmitting();
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::milliseconds(absl::ToInt64Milliseconds(grace)));
    server_->Wait();
    server_.reset();
  }

 private:
  GenerationService service_;
  std::unique_ptr<ReflectionServices> reflection_;
  std::unique_ptr<grpc::Server> server_;  // declared last: shut down before the services go
  int port_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<GrpcServer>> StartGrpcServer(engine::Engine* engine, const engine::Model* model,
                                                           const GrpcServerOptions& options) {
  auto server = std::make_unique<GrpcServerImpl>(engine, model, options);
  if (absl::Status s = server->Start(options); !s.ok()) return s;
  return server;
}

}  // namespace mcserve::server
