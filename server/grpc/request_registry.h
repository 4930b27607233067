// RequestRegistry: the ids under which Abort may name live Generate requests, and whose they are.
//
// A request is owned by its caller (the API key's name when keys are configured, else the
// connection). It gets either a server id (request_ids.h: unguessable) or the caller's own
// `request_id`, which lives in that caller's namespace: two callers may both use "job-1", and only
// reusing one of one's own live ids is ALREADY_EXISTS. Find resolves a client id for its owner only,
// and a server id for anyone who presents it (`bind_server_ids` false: the id is the capability) or
// for its owner only (`bind_server_ids` true, with API keys). Everything else is NOT_FOUND with the
// message of an unknown id, so Abort reveals nothing about other callers' requests.
// Free of gRPC types (unit-tested with the engine). Thread-safe: every method, any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mcserve::server {

class RequestRegistry {
 public:
  // Client-chosen ids longer than this are INVALID_ARGUMENT.
  static constexpr size_t kMaxClientIdBytes = 256;

  // `bind_server_ids`: a server id resolves for its owner only (set when API keys are configured).
  explicit RequestRegistry(bool bind_server_ids) : bind_server_ids_(bind_server_ids) {}

  // Reserves the id of a new request of `owner`: a fresh server id when `client_id` is empty, else
  // `client_id` (ALREADY_EXISTS if `owner` has a live request with it; INVALID_ARGUMENT if it has a
  // server id's form or is too long). Returns the id; Find answers NOT_FOUND for it until Attach.
  absl::StatusOr<std::string> Reserve(absl::string_view owner, absl::string_view client_id);
  // Binds a reserved id of `owner` to the engine's request id. No-op if it is not reserved.
  void Attach(absl::string_view owner, absl::string_view id, uint64_t engine_id);
  // Forgets a reserved id (the request ended). No-op if it is not reserved.
  void Release(absl::string_view owner, absl::string_view id);
  // The engine id of the request `owner` may abort as `id`; NOT_FOUND (one message for unknown,
  // someone else's and not yet attached ids).
  absl::StatusOr<uint64_t> Find(absl::string_view owner, absl::string_view id) const;
  // Ids reserved now.
  size_t size() const;
  // The NOT_FOUND every failed lookup of `id` answers (for callers that learn later that it ended).
  static absl::Status NotFound(absl::string_view id);

 private:
  static constexpr uint64_t kUnattached = 0;  // the engine numbers requests from 1
  struct ServerEntry {
    std::string owner;
    uint64_t engine_id = kUnattached;
  };
  using ClientKey = std::pair<std::string, std::string>;  // (owner, client id)

  const bool bind_server_ids_;
  mutable std::mutex mu_;
  absl::flat_hash_map<std::string, ServerEntry> server_ids_;
  absl::flat_hash_map<ClientKey, uint64_t> client_ids_;
};

}  // namespace mcserve::server
