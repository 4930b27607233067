// ApiKeys: the API keys a server accepts, each with a name. The name is the caller's identity: who
// owns a request (only its owner may abort it by a client-chosen id) and the `api_key_name` label of
// the per-caller metrics. Built once at start-up, then read-only: every method is safe from any thread.
#pragma once

#include <optional>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"

namespace mcserve::server {

class ApiKeys {
 public:
  // No keys: authentication is off and every caller is anonymous.
  ApiKeys() = default;
  // --api-key: one key, named "default".
  static ApiKeys Single(std::string key);
  // --api-key-file's text: one key per line as `NAME KEY` (separated by spaces or tabs); blank lines
  // and lines starting with `#` are skipped. InvalidArgument naming `source` and the line for a
  // malformed line, a repeated name or key, or a file with no key. Names are [A-Za-z0-9_.-]{1,64}.
  static absl::StatusOr<ApiKeys> Parse(absl::string_view text, absl::string_view source);
  // Reads and parses the file at `path` (InvalidArgument when it cannot be read).
  static absl::StatusOr<ApiKeys> FromFile(const std::string& path);

  // Whether any key is configured (then every route but health needs one).
  bool enabled() const { return !keys_.empty(); }
  // The name of the key `authorization` carries (an `Authorization` header or `authorization`
  // metadata value of the form `Bearer KEY`); nullopt when it carries none of the keys. Compares
  // against every key in time independent of where the value differs.
  std::optional<std::string> Authenticate(absl::string_view authorization) const;
  // Every key's name, in file order.
  std::vector<std::string> names() const;

 private:
  struct Key {
    std::string name;
    std::string secret;
  };
  std::vector<Key> keys_;
};

// Constant-time equality of two byte strings: the time depends on the lengths only.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

}  // namespace mcserve::server
