#include "server/http/http_server.h"

#include <httplib.h>

#include <chrono>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace mcserve::server {
namespace {

using engine::OutputEvent;
using engine::RequestHandle;

int64_t UnixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// HTTP status and OpenAI error type for an engine / parse error.
std::pair<int, const char*> HttpStatusOf(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
      return {400, "invalid_request_error"};
    case absl::StatusCode::kResourceExhausted:
      return {429, "rate_limit_error"};
    case absl::StatusCode::kUnavailable:
      return {503, "server_error"};
    default:
      return {500, "server_error"};
  }
}

void SendError(httplib::Response& res, int status, const std::string& message, const char* type) {
  res.status = status;
  res.set_content(ErrorJson(message, type, status), "application/json");
}

// Folds one event into the result (text, ids, logprob events, finish).
void Accumulate(CompletionResult& r, const OutputEvent& e, bool logprobs) {
  r.text += e.text;
  if (e.token_id >= 0) {
    r.token_ids.push_back(e.token_id);
    if (logprobs) r.logprob_events.push_back(e);
  }
  if (e.cached_prompt_tokens >= 0) r.cached_tokens = e.cached_prompt_tokens;
  if (e.is_final()) r.finish = e.finish;
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(engine::Engine* engine,
                                                             const engine::Tokenizer* tokenizer,
                                                             HttpServerOptions options) {
  std::unique_ptr<HttpServer> s(new HttpServer());
  s->engine_ = engine;
  s->tokenizer_ = tokenizer;
  s->options_ = std::move(options);
  const HttpServerOptions& o = s->options_;
  if (!o.tls_cert.empty() || !o.tls_key.empty()) {
    if (o.tls_cert.empty() || o.tls_key.empty()) {
      return absl::InvalidArgumentError("HTTP TLS needs both a certificate and a key");
    }
    auto ssl = std::make_unique<httplib::SSLServer>(o.tls_cert.c_str(), o.tls_key.c_str());
    if (!ssl->is_valid()) {
      return absl::InvalidArgumentError(
          absl::StrCat("HTTP TLS: cannot load certificate ", o.tls_cert, " and key ", o.tls_key));
    }
    s->server_ = std::move(ssl);
  } else {
    s->server_ = std::make_unique<httplib::Server>();
  }
  s->server_->set_payload_max_length(static_cast<size_t>(o.max_body_bytes));
  s->Routes();
  s->port_ = o.port == 0 ? s->server_->bind_to_any_port(o.host) : (s->server_->bind_to_port(o.host, o.port) ? o.port : -1);
  if (s->port_ <= 0) {
    return absl::UnavailableError(absl::StrCat("HTTP: cannot listen on ", o.host, ":", o.port));
  }
  httplib::Server* server = s->server_.get();
  s->thread_ = std::thread([server] { server->listen_after_bind(); });
  // httplib's stop() is a no-op until the listen loop runs: wait for it, so Stop never hangs.
  while (!server->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return s;
}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Stop() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

bool HttpServer::Authorized(const void* request) const {
  if (options_.api_key.empty()) return true;
  const auto& req = *static_cast<const httplib::Request*>(request);
  return req.get_header_value("Authorization") == "Bearer " + options_.api_key;
}

void HttpServer::Routes() {
  httplib::Server& srv = *server_;
  srv.Get("/health", [](const httplib::Request&, httplib::Response& res) { res.set_content("ok\n", "text/plain"); });
  srv.Get("/ready", [this](const httplib::Request&, httplib::Response& res) {
    const bool ready = !options_.ready || options_.ready();
    res.status = ready ? 200 : 503;
    res.set_content(ready ? "ready\n" : "not ready\n", "text/plain");
  });
  srv.Get("/metrics", [this](const httplib::Request& req, httplib::Response& res) {
    if (!Authorized(&req)) return SendError(res, 401, "missing or wrong API key", "authentication_error");
    if (!options_.metrics) return SendError(res, 404, "no metrics", "invalid_request_error");
    res.set_content(options_.metrics(), "text/plain; version=0.0.4; charset=utf-8");
  });
  srv.Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
    if (!Authorized(&req)) return SendError(res, 401, "missing or wrong API key", "authentication_error");
    nlohmann::json model = {{"id", options_.model_name}, {"object", "model"}, {"created", UnixSeconds()},
                            {"owned_by", "mcserve"}};
    res.set_content(nlohmann::json{{"object", "list"}, {"data", {model}}}.dump(), "application/json");
  });
  srv.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    if (!Authorized(&req)) return SendError(res, 401, "missing or wrong API key", "authentication_error");
    auto parsed = ParseCompletionRequest(req.body, *tokenizer_, options_.limits);
    if (!parsed.ok()) return SendError(res, 400, std::string(parsed.status().message()), "invalid_request_error");
    if (!parsed->model.empty() && parsed->model != options_.model_name) {
      return SendError(res, 404, absl::StrCat("model \"", parsed->model, "\" is not served here (", options_.model_name, ")"),
                       "invalid_request_error");
    }
    const bool logprobs = parsed->spec.sampling.logprobs > 0;
    const bool stream = parsed->stream;
    auto result = std::make_shared<CompletionResult>();
    result->model = options_.model_name;
    result->created = UnixSeconds();
    result->prompt_tokens = static_cast<int64_t>(parsed->spec.prompt.size());
    auto submitted = engine_->Submit(std::move(parsed->spec));
    if (!submitted.ok()) {
      const auto [status, type] = HttpStatusOf(submitted.status());
      return SendError(res, status, std::string(submitted.status().message()), type);
    }
    std::shared_ptr<RequestHandle> handle = std::move(*submitted);
    result->id = absl::StrCat("cmpl-", handle->id());
    if (!stream) {
      while (true) {
        auto event = handle->Next(absl::Hours(1));
        if (!event.ok()) break;
        Accumulate(*result, *event, logprobs);
        if (event->finish == engine::FinishReason::kError) {
          return SendError(res, 500, std::string(event->error.message()), "server_error");
        }
        if (event->is_final()) break;
      }
      res.set_content(CompletionJson(*result, *tokenizer_, logprobs), "application/json");
      return;
    }
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, handle, result, logprobs](size_t, httplib::DataSink& sink) {
          auto event = handle->Next(absl::Milliseconds(100));
          if (!event.ok()) {
            if (absl::IsDeadlineExceeded(event.status()) && sink.is_writable()) return true;  // poll again
            handle->Abort();  // the client went away (or the stream is over)
            return false;
          }
          Accumulate(*result, *event, logprobs);
          // Nothing to show yet (held-back bytes of a character or of a possible stop string).
          if (event->text.empty() && !event->is_final() && !(logprobs && event->token_id >= 0)) return true;
          const std::string chunk = absl::StrCat("data: ", CompletionChunkJson(*result, *event, *tokenizer_, logprobs), "\n\n");
          if (!sink.write(chunk.data(), chunk.size())) {
            handle->Abort();
            return false;
          }
          if (event->is_final()) {
            static constexpr char kDone[] = "data: [DONE]\n\n";
            sink.write(kDone, sizeof(kDone) - 1);
            sink.done();
          }
          return true;
        },
        [handle](bool success) {
          if (!success) handle->Abort();
        });
  });
}

}  // namespace mcserve::server
