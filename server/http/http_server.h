// HttpServer: mcserve's HTTP port: `GET /health` (live), `GET /ready` (model loaded and admitting),
// `GET /metrics` (Prometheus text), OpenAI-compatible `POST /v1/completions` (JSON, or server-sent
// events when `stream` is true) and `GET /v1/models`. Every route but /health and /ready requires an
// API key when keys are set (`Authorization: Bearer <key>`).
//
// Event-driven (Boost.Beast on Asio): a small fixed pool of threads runs every connection, each on
// its own strand (server/http/connection.h); no thread is tied to a connection or a stream, so slow
// or idle clients cost a socket, not a thread.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "engine/model/tokenizer.h"
#include "engine/serving/engine.h"
#include "server/http/http_options.h"

namespace mcserve::server {

class HttpServer {
 public:
  // Binds and starts serving on options.io_threads threads. `engine` and `tokenizer` must outlive
  // the server. Unavailable when the address cannot be bound; InvalidArgument for bad TLS files.
  // Any thread.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(engine::Engine* engine, const engine::Tokenizer* tokenizer,
                                                           HttpServerOptions options);
  // Stop().
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // The bound port. Any thread.
  int port() const;
  // Starts draining: from now on POST /v1/completions answers 503 (and closes its connection) and
  // /ready 503; completions in flight go on. Any thread.
  void StopAdmitting();
  // Completions (streamed or not) submitted and not yet finished. Any thread.
  int active_requests() const;
  // Closes every connection (idle, slow, mid-request), cancels the completions in flight, stops
  // the I/O threads and joins them. Returns promptly whatever the clients do. Idempotent; any thread
  // but the server's own.
  void Stop();

 private:
  struct Impl;
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace mcserve::server
