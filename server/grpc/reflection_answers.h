// ReflectionAnswers: the content of gRPC server reflection (grpc.reflection.v1; v1alpha is the same
// on the wire), answered from protobuf's generated descriptor pool: the files compiled into mcserve
// (mcserve.v1, grpc.health.v1, the reflection protocols, protobuf's own).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "grpc/reflection/v1/reflection.pb.h"

namespace mcserve::server {

class ReflectionAnswers {
 public:
  // Answers for a server serving `services` (fully qualified names, listed in this order);
  // INTERNAL naming a service whose descriptor is not in the generated pool (it could not be
  // described). Any thread.
  static absl::StatusOr<ReflectionAnswers> Create(std::vector<std::string> services);

  // The response to one request: a list of services, the serialized FileDescriptorProtos of a file
  // and its transitive dependencies, extension numbers, or an ErrorResponse (NOT_FOUND for an
  // unknown file, symbol, type or extension; UNIMPLEMENTED for an unknown kind of request). Const:
  // any thread.
  grpc::reflection::v1::ServerReflectionResponse Answer(
      const grpc::reflection::v1::ServerReflectionRequest& request) const;

 private:
  explicit ReflectionAnswers(std::vector<std::string> services) : services_(std::move(services)) {}

  std::vector<std::string> services_;
};

}  // namespace mcserve::server
