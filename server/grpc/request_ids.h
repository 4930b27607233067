// Server-assigned request ids: `req-` and 32 hexadecimal digits (128 bits from the kernel's CSPRNG,
// getrandom(2)). Unguessable, so that without API keys a server id is a capability: whoever holds it
// may abort the request. Free of gRPC types (unit-tested with the engine).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mcserve::server {

// A fresh server request id. INTERNAL if the kernel has no randomness to give (getrandom fails).
// Any thread.
absl::StatusOr<std::string> NewServerRequestId();

// Whether `id` has the form of a server request id (`req-` + 32 lowercase hex digits). Client-chosen
// ids of that form are refused, so the two kinds never collide. Any thread.
bool IsServerRequestId(absl::string_view id);

}  // namespace mcserve::server
