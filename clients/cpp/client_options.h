// ClientOptions: where a GenerationClient connects and how it authenticates (plain value).
#pragma once

#include <string>

#include "absl/time/time.h"

namespace mcserve::client {

struct ClientOptions {
  // host:port of the server's gRPC port (any gRPC target, e.g. dns:///h:p or unix:/path).
  std::string address = "localhost:8001";
  // Sent as metadata `authorization: Bearer <api_key>` on every call when not empty.
  std::string api_key;
  // TLS is used when `tls` is set or any of the three paths below is given.
  bool tls = false;
  // PEM roots that sign the server's certificate; "" = the system's roots.
  std::string tls_ca_path;
  // PEM client certificate chain and its key, for servers that require mutual TLS (both or neither).
  std::string tls_cert_path;
  std::string tls_key_path;
  // The name checked against the server's certificate instead of the address's host.
  std::string tls_server_name;
  // Deadline of each call (for Generate: the whole stream); InfiniteDuration = none.
  absl::Duration timeout = absl::InfiniteDuration();

  // Whether the options ask for TLS.
  bool UsesTls() const { return tls || !tls_ca_path.empty() || !tls_cert_path.empty() || !tls_key_path.empty(); }
};

}  // namespace mcserve::client
