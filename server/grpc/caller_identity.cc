#include "server/grpc/caller_identity.h"

#include <optional>

#include "absl/strings/string_view.h"

namespace mcserve::server {

absl::StatusOr<Caller> CallerAuthenticator::Identify(const grpc::CallbackServerContext& context) const {
  if (!keys_.enabled()) return Caller{context.peer(), ""};
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find("authorization");
  std::optional<std::string> name;
  if (it != metadata.end()) name = keys_.Authenticate(absl::string_view(it->second.data(), it->second.size()));
  if (!name.has_value()) {
    if (accounting_ != nullptr) accounting_->Unauthenticated();
    return absl::UnauthenticatedError("missing or wrong API key: send metadata `authorization: Bearer <key>`");
  }
  return Caller{*name, *name};
}

}  // namespace mcserve::server
