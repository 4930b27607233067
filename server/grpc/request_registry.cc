#include "server/grpc/request_registry.h"

#include "absl/strings/str_cat.h"
#include "server/grpc/request_ids.h"

namespace mcserve::server {

absl::Status RequestRegistry::NotFound(absl::string_view id) {
  return absl::NotFoundError(absl::StrCat("request_id: no request \"", id, "\" in flight"));
}

absl::StatusOr<std::string> RequestRegistry::Reserve(absl::string_view owner, absl::string_view client_id) {
  if (client_id.empty()) {
    for (;;) {
      absl::StatusOr<std::string> id = NewServerRequestId();
      if (!id.ok()) return id.status();
      std::lock_guard<std::mutex> lock(mu_);
      if (server_ids_.try_emplace(*id, ServerEntry{std::string(owner), kUnattached}).second) return id;
    }
  }
  if (client_id.size() > kMaxClientIdBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("request_id: ", client_id.size(), " bytes, longer than ", kMaxClientIdBytes));
  }
  if (IsServerRequestId(client_id)) {
    return absl::InvalidArgumentError("request_id: ids of the form req-<32 hex digits> are the server's");
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!client_ids_.try_emplace(ClientKey(owner, client_id), kUnattached).second) {
    return absl::AlreadyExistsError(absl::StrCat("request_id: \"", client_id, "\" is already in flight"));
  }
  return std::string(client_id);
}

void RequestRegistry::Attach(absl::string_view owner, absl::string_view id, uint64_t engine_id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (IsServerRequestId(id)) {
    const auto it = server_ids_.find(id);
    if (it != server_ids_.end() && it->second.owner == owner) it->second.engine_id = engine_id;
    return;
  }
  const auto it = client_ids_.find(ClientKey(owner, id));
  if (it != client_ids_.end()) it->second = engine_id;
}

void RequestRegistry::Release(absl::string_view owner, absl::string_view id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (IsServerRequestId(id)) {
    const auto it = server_ids_.find(id);
    if (it != server_ids_.end() && it->second.owner == owner) server_ids_.erase(it);
    return;
  }
  client_ids_.erase(ClientKey(owner, id));
}

absl::StatusOr<uint64_t> RequestRegistry::Find(absl::string_view owner, absl::string_view id) const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t engine_id = kUnattached;
  if (IsServerRequestId(id)) {
    const auto it = server_ids_.find(id);
    if (it != server_ids_.end() && (!bind_server_ids_ || it->second.owner == owner)) engine_id = it->second.engine_id;
  } else if (const auto it = client_ids_.find(ClientKey(owner, id)); it != client_ids_.end()) {
    engine_id = it->second;
  }
  if (engine_id == kUnattached) return NotFound(id);
  return engine_id;
}

size_t RequestRegistry::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return server_ids_.size() + client_ids_.size();
}

}  // namespace mcserve::server
