// Transport: one accepted connection's byte stream, plain TCP or TLS over it, behind one type so
// that the HTTP code above it is written once. Models Asio's AsyncReadStream and AsyncWriteStream
// (Beast's parser and asio::async_write take it). Its executor is the connection's strand: every
// call, and every completion handler, runs there.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <functional>
#include <optional>
#include <utility>

namespace mcserve::server {

class Transport {
 public:
  using executor_type = boost::asio::ip::tcp::socket::executor_type;

  // Takes `socket`; TLS when `tls` is set (it must outlive the Transport). Any thread.
  Transport(boost::asio::ip::tcp::socket socket, boost::asio::ssl::context* tls);

  // The connection's strand. Any thread.
  executor_type get_executor() { return socket().get_executor(); }
  // The TCP socket (under TLS, the layer below it). Strand.
  boost::asio::ip::tcp::socket& socket() { return tls_ ? tls_->next_layer() : *plain_; }
  // Whether the bytes go through TLS. Any thread.
  bool tls() const { return tls_.has_value(); }

  // Reads some bytes (decrypted under TLS); `handler(error_code, size_t)` runs on the strand. Strand.
  template <typename MutableBuffers, typename Handler>
  void async_read_some(const MutableBuffers& buffers, Handler&& handler) {
    if (tls_) {
      tls_->async_read_some(buffers, std::forward<Handler>(handler));
    } else {
      plain_->async_read_some(buffers, std::forward<Handler>(handler));
    }
  }
  // Writes some bytes (encrypted under TLS); `handler(error_code, size_t)` runs on the strand. Strand.
  template <typename ConstBuffers, typename Handler>
  void async_write_some(const ConstBuffers& buffers, Handler&& handler) {
    if (tls_) {
      tls_->async_write_some(buffers, std::forward<Handler>(handler));
    } else {
      plain_->async_write_some(buffers, std::forward<Handler>(handler));
    }
  }

  // The server side of the TLS handshake; completes at once (success) for plain TCP. Strand.
  void AsyncHandshake(std::function<void(boost::system::error_code)> done);
  // Stops sending (TCP FIN; no TLS close_notify), keeps receiving. Errors are ignored. Strand.
  void ShutdownSend();
  // Closes the socket: pending operations complete with operation_aborted. Errors are ignored. Strand.
  void Close();

 private:
  std::optional<boost::asio::ip::tcp::socket> plain_;
  std::optional<boost::asio::ssl::stream<boost::asio::ip::tcp::socket>> tls_;
};

}  // namespace mcserve::server
