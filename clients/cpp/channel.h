// The gRPC channel a GenerationClient talks over, built from ClientOptions (plaintext, TLS, mutual TLS).
#pragma once

#include <memory>

#include <grpcpp/channel.h>

#include "absl/status/statusor.h"
#include "clients/cpp/client_options.h"

namespace mcserve::client {

// A channel to options.address. Reads the PEM files named by the options; INVALID_ARGUMENT naming
// the option when one cannot be read or the certificate/key pair is incomplete. Connects lazily
// (a server that is down shows up as UNAVAILABLE on the first call). Any thread.
absl::StatusOr<std::shared_ptr<grpc::Channel>> CreateChannel(const ClientOptions& options);

}  // namespace mcserve::client
