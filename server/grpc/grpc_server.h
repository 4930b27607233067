// GrpcServer: the whole gRPC front end (Generation + grpc.health.v1.Health + reflection v1 and
// v1alpha) behind a small interface, so that mcserve and the tests include no gRPC header to run it.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/runner/model.h"
#include "engine/serving/engine.h"
#include "server/common/api_keys.h"
#include "server/common/caller_accounting.h"

namespace mcserve::server {

// Where and how to listen, and the service's settings.
struct GrpcServerOptions {
  std::string host = "0.0.0.0";
  int port = 0;                     // 0 = pick a free port
  std::string tls_cert_pem;         // TLS when set (with tls_key_pem)
  std::string tls_key_pem;
  std::string tls_client_ca_pem;    // require and verify client certificates when set
  std::string model_path;
  ApiKeys api_keys;                         // none: no authentication (health never needs a key)
  CallerAccounting* accounting = nullptr;  // per-caller counts; may be null; must outlive the server
  std::string version;
  // Requests larger than this get INVALID_ARGUMENT naming the limit; gRPC itself drops anything over
  // kTransportLimitFactor times it (RESOURCE_EXHAUSTED) without reading it all.
  size_t max_request_bytes = 4 << 20;
  static constexpr size_t kTransportLimitFactor = 4;
  // The engine's write timeout (--write-timeout-seconds): a stream whose write has waited longer
  // when more output arrives is cancelled. Zero or infinite: never.
  absl::Duration write_timeout = absl::Seconds(60);
};

// A running server. Any thread.
class GrpcServer {
 public:
  virtual ~GrpcServer() = default;
  // The port actually bound.
  virtual int port() const = 0;
  // Health → NOT_SERVING and new Generate calls → UNAVAILABLE (the first step of a graceful stop).
  virtual void StopAdmitting() = 0;
  // Generate streams still running.
  virtual int active_streams() const = 0;
  // Stops the server: calls still open after `grace` are cancelled; returns when all are done.
  // Call after the engine's Shutdown (so every stream has its final response).
  virtual void Shutdown(absl::Duration grace) = 0;
};

// Starts the server over `engine` and `model` (both must outlive it). UNAVAILABLE if it cannot
// listen; INVALID_ARGUMENT for bad TLS settings.
absl::StatusOr<std::unique_ptr<GrpcServer>> StartGrpcServer(engine::Engine* engine, const engine::Model* model,
                                                           const GrpcServerOptions& options);

}  // namespace mcserve::server
