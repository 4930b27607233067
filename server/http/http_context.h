// HttpContext: what every connection of one HttpServer shares: the engine, tokenizer and options,
// the TLS context, the pool that parses requests, whether new completions are admitted, the completions in flight and
// the live connections. Owned by the HttpServer and outlives all its connections; the atomics and the registry may be
// used from any thread, the rest is read-only once serving.
#pragma once

#include <atomic>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <memory>

#include "engine/model/tokenizer.h"
#include "engine/serving/engine.h"
#include "server/http/connection_registry.h"
#include "server/http/http_options.h"

namespace mcserve::server {

struct HttpContext {
  engine::Engine* engine = nullptr;
  const engine::Tokenizer* tokenizer = nullptr;
  HttpServerOptions options;
  std::unique_ptr<boost::asio::ssl::context> tls;  // null: plain HTTP
  boost::asio::thread_pool* parse_pool = nullptr;  // parses and tokenizes completion requests
  std::atomic<bool> admitting{true};               // false after StopAdmitting or Stop
  std::atomic<int> active_requests{0};             // completions submitted and not yet finished
  ConnectionRegistry connections;
};

}  // namespace mcserve::server
