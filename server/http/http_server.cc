#include "server/http/http_server.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <cstdio>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/http/connection.h"
#include "server/http/http_context.h"

namespace mcserve::server {

namespace asio = boost::asio;
using asio::ip::tcp;
using boost::system::error_code;

struct HttpServer::Impl {
  // Declared first: outlives the io_context, whose destruction releases the last connections.
  HttpContext context;
  asio::io_context io;
  std::optional<asio::thread_pool> parse_pool;  // joined before the io_context goes
  asio::strand<asio::io_context::executor_type> accept_strand = asio::make_strand(io);
  tcp::acceptor acceptor{accept_strand};
  asio::steady_timer accept_retry{accept_strand};
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::vector<std::thread> threads;
  std::mutex stop_mu;
  bool stopped = false;
  int port = 0;

  absl::Status LoadTls();
  absl::Status Listen();
  void Accept();
  void Run();
};

absl::Status HttpServer::Impl::LoadTls() {
  const HttpServerOptions& o = context.options;
  if (o.tls_cert.empty() && o.tls_key.empty()) return absl::OkStatus();
  if (o.tls_cert.empty() || o.tls_key.empty()) {
    return absl::InvalidArgumentError("HTTP TLS needs both a certificate and a key");
  }
  auto tls = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
  tls->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                   asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1);
  error_code cert_error, key_error;
  tls->use_certificate_chain_file(o.tls_cert, cert_error);
  tls->use_private_key_file(o.tls_key, asio::ssl::context::pem, key_error);
  if (cert_error || key_error) {
    return absl::InvalidArgumentError(absl::StrCat("HTTP TLS: cannot load certificate ", o.tls_cert, " and key ",
                                                   o.tls_key, ": ", (cert_error ? cert_error : key_error).message()));
  }
  context.tls = std::move(tls);
  return absl::OkStatus();
}

absl::Status HttpServer::Impl::Listen() {
  const HttpServerOptions& o = context.options;
  const auto unavailable = [&o](const error_code& ec) {
    return absl::UnavailableError(absl::StrCat("HTTP: cannot listen on ", o.host, ":", o.port, ": ", ec.message()));
  };
  error_code ec;
  asio::ip::address address = asio::ip::make_address(o.host, ec);
  if (ec) {
    tcp::resolver resolver(io);
    auto found = resolver.resolve(o.host, "", ec);
    if (ec) return unavailable(ec);
    if (found.empty()) return unavailable(asio::error::host_not_found);
    address = found.begin()->endpoint().address();
  }
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(o.port));
  if (acceptor.open(endpoint.protocol(), ec); ec) return unavailable(ec);
  if (acceptor.set_option(tcp::acceptor::reuse_address(true), ec); ec) return unavailable(ec);
  if (acceptor.bind(endpoint, ec); ec) return unavailable(ec);
  if (acceptor.listen(asio::socket_base::max_listen_connections, ec); ec) return unavailable(ec);
  port = acceptor.local_endpoint().port();
  return absl::OkStatus();
}

void HttpServer::Impl::Accept() {
  acceptor.async_accept(asio::make_strand(io), [this](error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
    if (ec) {
      // Out of descriptors or memory: try again shortly rather than spin on the error.
      accept_retry.expires_after(std::chrono::milliseconds(50));
      accept_retry.async_wait([this](error_code wait_error) {
        if (!wait_error && acceptor.is_open()) Accept();
      });
      return;
    }
    error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    auto connection = std::make_shared<Connection>(&context, std::move(socket));
    if (context.connections.Add(connection)) connection->Start();
    Accept();
  });
}

void HttpServer::Impl::Run() {
  while (true) {
    try {
      io.run();
      return;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "mcserve: HTTP: %s\n", e.what());
    }
  }
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(engine::Engine* engine,
                                                              const engine::Tokenizer* tokenizer,
                                                              HttpServerOptions options) {
  auto impl = std::make_unique<Impl>();
  impl->context.engine = engine;
  impl->context.tokenizer = tokenizer;
  impl->context.options = std::move(options);
  if (absl::Status s = impl->LoadTls(); !s.ok()) return s;
  if (absl::Status s = impl->Listen(); !s.ok()) return s;
  Impl* raw = impl.get();
  raw->parse_pool.emplace(static_cast<size_t>(std::max(1, raw->context.options.parse_threads)));
  raw->context.parse_pool = &*raw->parse_pool;
  asio::post(raw->accept_strand, [raw] { raw->Accept(); });
  raw->work.emplace(raw->io.get_executor());
  for (int i = 0; i < std::max(1, raw->context.options.io_threads); ++i) {
    raw->threads.emplace_back([raw] { raw->Run(); });
  }
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

HttpServer::~HttpServer() { Stop(); }

int HttpServer::port() const { return impl_->port; }

void HttpServer::StopAdmitting() { impl_->context.admitting = false; }

int HttpServer::active_requests() const { return impl_->context.active_requests.load(); }

void HttpServer::Stop() {
  Impl& impl = *impl_;
  std::lock_guard<std::mutex> lock(impl.stop_mu);  // a second caller returns once the server has stopped
  if (impl.stopped) return;
  impl.stopped = true;
  impl.context.admitting = false;
  impl.context.connections.Seal();
  asio::post(impl.accept_strand, [&impl] {
    error_code ignored;
    impl.acceptor.close(ignored);
    impl.accept_retry.cancel();
  });
  for (const auto& connection : impl.context.connections.Live()) connection->Close();
  impl.work.reset();
  impl.io.stop();
  for (std::thread& t : impl.threads) t.join();
  // Queued parses are dropped; one in progress finishes, and what it posts to a strand never runs.
  impl.parse_pool->stop();
  impl.parse_pool->join();
  // What the threads did not get to: closed here, no thread running the io_context any more. This
  // detaches every listener from the engine before the io_context they post to goes away.
  error_code ignored;
  impl.acceptor.close(ignored);
  for (const auto& connection : impl.context.connections.Live()) connection->CloseWhileStopped();
}

}  // namespace mcserve::server
