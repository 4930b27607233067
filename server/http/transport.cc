#include "server/http/transport.h"

#include <boost/asio/post.hpp>

namespace mcserve::server {

namespace asio = boost::asio;

Transport::Transport(asio::ip::tcp::socket socket, asio::ssl::context* tls) {
  if (tls != nullptr) {
    tls_.emplace(std::move(socket), *tls);
  } else {
    plain_.emplace(std::move(socket));
  }
}

void Transport::AsyncHandshake(std::function<void(boost::system::error_code)> done) {
  if (!tls_) {
    asio::post(get_executor(), [done = std::move(done)] { done({}); });
    return;
  }
  tls_->async_handshake(asio::ssl::stream_base::server, std::move(done));
}

void Transport::ShutdownSend() {
  boost::system::error_code ignored;
  socket().shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
}

void Transport::Close() {
  boost::system::error_code ignored;
  socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  socket().close(ignored);
}

}  // namespace mcserve::server
