// HttpServer: mcserve's HTTP port (cpp-httplib): `GET /health` (live), `GET /ready` (model loaded),
// `GET /metrics` (Prometheus text), OpenAI-compatible `POST /v1/completions` (JSON, or server-sent
// events when `stream` is true) and `GET /v1/models`. Every route but /health and /ready requires
// the API key when one is set (`Authorization: Bearer <key>`). Handlers run on cpp-httplib's worker
// threads; a client that disconnects mid-stream aborts its request.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "engine/model/tokenizer.h"
#include "engine/serving/engine.h"
#include "server/http/openai_completion.h"

namespace httplib {
class Server;
}

namespace mcserve::server {

struct HttpServerOptions {
  std::string host = "0.0.0.0";
  int port = 0;                  // 0 = pick a free port
  std::string model_name;        // the id /v1/models lists and responses carry
  std::string api_key;           // "" = no key required
  std::string tls_cert, tls_key; // PEM files; both set = HTTPS
  CompletionLimits limits;
  int max_body_bytes = 1 << 22;  // larger request bodies get 413
  std::function<std::string()> metrics;  // the /metrics body (text format 0.0.4); null = 404
  std::function<bool()> ready;           // /ready; null = always ready
};

class HttpServer {
 public:
  // Binds and starts serving on a background thread. `engine` and `tokenizer` must outlive the
  // server. Unavailable when the port cannot be bound; InvalidArgument for bad TLS files.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(engine::Engine* engine, const engine::Tokenizer* tokenizer,
                                                           HttpServerOptions options);
  // Stop().
  ~HttpServer();
  // The bound port.
  int port() const { return port_; }
  // Stops accepting, ends in-flight streams, joins the thread. Idempotent; any thread.
  void Stop();

 private:
  HttpServer() = default;
  void Routes();
  bool Authorized(const void* request) const;

  engine::Engine* engine_ = nullptr;
  const engine::Tokenizer* tokenizer_ = nullptr;
  HttpServerOptions options_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace mcserve::server
