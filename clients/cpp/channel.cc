#include "clients/cpp/channel.h"

#include <fstream>
#include <sstream>
#include <string>

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace mcserve::client {
namespace {

// The whole file at `path`, named by `option` in the error.
absl::StatusOr<std::string> ReadPem(const char* option, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(option, ": cannot read \"", path, "\""));
  std::stringstream contents;
  contents << in.rdbuf();
  if (contents.str().empty()) return absl::InvalidArgumentError(absl::StrCat(option, ": \"", path, "\" is empty"));
  return contents.str();
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> TlsCredentials(const ClientOptions& options) {
  if (options.tls_cert_path.empty() != options.tls_key_path.empty()) {
    return absl::InvalidArgumentError("tls_cert and tls_key: give both (mutual TLS) or neither");
  }
  grpc::SslCredentialsOptions ssl;
  if (!options.tls_ca_path.empty()) {
    absl::StatusOr<std::string> roots = ReadPem("tls_ca", options.tls_ca_path);
    if (!roots.ok()) return roots.status();
    ssl.pem_root_certs = *std::move(roots);
  }
  if (!options.tls_cert_path.empty()) {
    absl::StatusOr<std::string> cert = ReadPem("tls_cert", options.tls_cert_path);
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadPem("tls_key", options.tls_key_path);
    if (!key.ok()) return key.status();
    ssl.pem_cert_chain = *std::move(cert);
    ssl.pem_private_key = *std::move(key);
  }
  return grpc::SslCredentials(ssl);
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::Channel>> CreateChannel(const ClientOptions& options) {
  if (options.address.empty()) return absl::InvalidArgumentError("address: empty (want HOST:PORT)");
  grpc::ChannelArguments args;
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (options.UsesTls()) {
    absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> tls = TlsCredentials(options);
    if (!tls.ok()) return tls.status();
    credentials = *std::move(tls);
    if (!options.tls_server_name.empty()) args.SetSslTargetNameOverride(options.tls_server_name);
  } else if (!options.tls_server_name.empty()) {
    return absl::InvalidArgumentError("tls_server_name: only meaningful with TLS (set tls or tls_ca)");
  }
  return grpc::CreateCustomChannel(options.address, credentials, args);
}

}  // namespace mcserve::client
