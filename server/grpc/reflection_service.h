// ReflectionServices: gRPC server reflection, both grpc.reflection.v1.ServerReflection (what current
// clients such as grpcurl ask first) and grpc.reflection.v1alpha.ServerReflection (older clients),
// answered by ReflectionAnswers. Behind the API keys like every service but health. Both methods are
// registered raw and decoded by DecodeRequest (the two versions are identical on the wire).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "server/common/api_keys.h"
#include "server/common/caller_accounting.h"

namespace mcserve::server {

// What reflection serves and how (plain value).
struct ReflectionOptions {
  std::vector<std::string> services;       // what list_services reports, besides reflection itself
  ApiKeys api_keys;                         // none = no authentication
  CallerAccounting* accounting = nullptr;  // counts refused calls; may be null; must outlive the services
  size_t max_request_bytes = 4 << 20;      // larger requests end the stream with INVALID_ARGUMENT
};

class ReflectionServices {
 public:
  // The two services over `options`; INTERNAL if a listed service cannot be described. Any thread.
  static absl::StatusOr<std::unique_ptr<ReflectionServices>> Create(ReflectionOptions options);
  virtual ~ReflectionServices() = default;

  // The services to register with a grpc::ServerBuilder (owned by this object, which must outlive
  // the server). The thread that builds the server.
  virtual std::vector<grpc::Service*> services() = 0;
  // The fully qualified names of the reflection services. Any thread.
  static std::vector<std::string> Names();
};

}  // namespace mcserve::server
