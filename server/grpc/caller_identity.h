// Who is calling: authentication against the API keys and the caller's identity for request
// ownership (request_registry.h) and per-caller accounting.
#pragma once

#include <string>
#include <utility>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "server/common/api_keys.h"
#include "server/common/caller_accounting.h"

namespace mcserve::server {

// The identity of one call's caller. Plain value.
struct Caller {
  std::string owner;     // owns the caller's requests: the API key's name, else the connection (peer)
  std::string key_name;  // the API key's name, "" without keys: CallerAccounting's label
};

// Authenticates calls against `keys` (read-only after construction: any thread).
class CallerAuthenticator {
 public:
  // `accounting` (may be null) must outlive the authenticator.
  CallerAuthenticator(ApiKeys keys, CallerAccounting* accounting)
      : keys_(std::move(keys)), accounting_(accounting) {}

  // The caller of `context`; UNAUTHENTICATED (counted as CallerAccounting::Unauthenticated) when keys
  // are configured and the `authorization: Bearer KEY` metadata carries none of them. gRPC threads.
  absl::StatusOr<Caller> Identify(const grpc::CallbackServerContext& context) const;
  // Whether API keys are configured (then a caller is its key, not its connection). Any thread.
  bool keyed() const { return keys_.enabled(); }

 private:
  const ApiKeys keys_;
  CallerAccounting* const accounting_;
};

}  // namespace mcserve::server
