// HttpServerOptions: what the HTTP front end serves, with which keys, and its limits on each
// connection (sizes, timeouts). A plain value, read-only once the server has started.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "absl/time/time.h"
#include "server/common/api_keys.h"
#include "server/common/caller_accounting.h"
#include "server/http/chat_template_config.h"
#include "server/http/openai_completion.h"

namespace mcserve::server {

struct HttpServerOptions {
  std::string host = "0.0.0.0";
  int port = 0;                            // 0 = pick a free port
  std::string model_name;                  // the id /v1/models lists and responses carry
  std::string version;                     // what /version reports
  ChatTemplateConfig chat;                 // the model's chat template (none: chat completions get 400)
  ApiKeys api_keys;                        // none = no key required; else every route but /health and /ready
  CallerAccounting* accounting = nullptr;  // per-caller counts (may be null); must outlive the server
  std::string tls_cert, tls_key;           // PEM files; both set = HTTPS
  int default_max_tokens = 16;             // a completion's max_tokens when the request names none (OpenAI's)
  int64_t max_body_bytes = 4 << 20;  // larger request bodies (after decompression) get 413
  int max_header_bytes = 16 << 10;   // a larger request head gets 431
  int max_headers = 100;             // more header fields get 431
  int io_threads = 2;                // threads running every connection's I/O
  int parse_threads = 2;             // threads parsing and tokenizing completion requests
  // Deadlines that close the connection when reached; zero or less: none.
  absl::Duration header_timeout = absl::Seconds(10);  // for a request head (and the TLS handshake)
  absl::Duration body_timeout = absl::Seconds(30);    // for its body, once the head is in
  absl::Duration idle_timeout = absl::Seconds(30);    // for the next request on a keep-alive connection
  absl::Duration write_timeout = absl::Seconds(60);   // for the client to take more of a reply
  std::function<std::string()> metrics;               // the /metrics body (text format 0.0.4); null = 404
  std::function<bool()> ready;                        // /ready; null = always ready
};

}  // namespace mcserve::server
