#include "server/grpc/request_ids.h"

#include <sys/random.h>

#include <array>
#include <cerrno>
#include <cstddef>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace mcserve::server {
namespace {

constexpr absl::string_view kPrefix = "req-";
constexpr size_t kRandomBytes = 16;

}  // namespace

absl::StatusOr<std::string> NewServerRequestId() {
  std::array<char, kRandomBytes> bytes;
  size_t filled = 0;
  while (filled < bytes.size()) {
    const ssize_t n = getrandom(bytes.data() + filled, bytes.size() - filled, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return absl::InternalError(absl::StrCat("getrandom failed (errno ", errno, "): no request id"));
    filled += static_cast<size_t>(n);
  }
  return absl::StrCat(kPrefix, absl::BytesToHexString(absl::string_view(bytes.data(), bytes.size())));
}

bool IsServerRequestId(absl::string_view id) {
  if (!absl::StartsWith(id, kPrefix) || id.size() != kPrefix.size() + 2 * kRandomBytes) return false;
  for (const char c : id.substr(kPrefix.size())) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c)) || absl::ascii_isupper(static_cast<unsigned char>(c))) {
      return false;
    }
  }
  return true;
}

}  // namespace mcserve::server
