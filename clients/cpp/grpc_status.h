// gRPC status → absl::Status (the two share their code numbering).
#pragma once

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace mcserve::client {

// The same code and message. Any thread.
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace mcserve::client
