// A blocking HTTP/1.1 client for the HTTP server's tests (Beast over loopback): one request per call
// on a fresh connection, every wait bounded, and raw sockets for tests that misbehave on purpose.
#pragma once

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <chrono>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"

namespace mcserve::server::testing {

struct HttpReply {
  int status = 0;  // 0: no reply (the connection failed or closed first)
  std::string body;
  std::map<std::string, std::string> headers;  // names in lower case
  std::string error;                           // why there is no reply
};

using Headers = std::vector<std::pair<std::string, std::string>>;

// Sends one request on a new connection to 127.0.0.1:`port` and reads the whole reply, both within
// `timeout` (a liveness bound, not a performance claim).
inline HttpReply Request(int port, const std::string& method, const std::string& target, const std::string& body = "",
                         const Headers& headers = {}, std::chrono::seconds timeout = std::chrono::seconds(60)) {
  namespace beast = boost::beast;
  namespace http = beast::http;
  boost::asio::io_context io;
  beast::tcp_stream stream(io);
  HttpReply reply;
  beast::error_code ec;
  stream.expires_after(timeout);
  stream.connect(
      boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)),
      ec);
  if (ec) return {.error = ec.message()};
  http::request<http::string_body> req{http::string_to_verb(method), target, 11};
  req.set(http::field::host, "127.0.0.1");
  for (const auto& [name, value] : headers) req.set(name, value);
  if (!body.empty() || method == "POST") {
    req.body() = body;
    req.prepare_payload();
  }
  http::write(stream, req, ec);
  if (ec) return {.error = ec.message()};
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 << 20);
  http::read(stream, buffer, parser, ec);
  if (ec) return {.error = ec.message()};
  const auto& res = parser.get();
  reply.status = res.result_int();
  reply.body = res.body();
  for (const auto& field : res) {
    reply.headers[absl::AsciiStrToLower(std::string(field.name_string()))] = std::string(field.value());
  }
  return reply;
}

inline HttpReply Get(int port, const std::string& target, const Headers& headers = {}) {
  return Request(port, "GET", target, "", headers);
}

inline HttpReply Post(int port, const std::string& target, const std::string& body, const Headers& headers = {}) {
  return Request(port, "POST", target, body, headers);
}

// A raw loopback connection for tests that send malformed, partial or slow requests.
class RawConnection {
 public:
  // `receive_buffer` > 0: SO_RCVBUF set before connecting (a client that reads slowly fills it soon).
  explicit RawConnection(int port, int receive_buffer = 0) : socket_(io_) {
    boost::system::error_code ec;
    socket_.open(boost::asio::ip::tcp::v4(), ec);
    if (receive_buffer > 0) socket_.set_option(boost::asio::socket_base::receive_buffer_size(receive_buffer), ec);
    socket_.connect(
        boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)),
        ec);
    connected_ = !ec;
  }
  bool connected() const { return connected_; }
  // Sends `bytes`; false if the connection refused them.
  bool Send(const std::string& bytes) {
    boost::system::error_code ec;
    boost::asio::write(socket_, boost::asio::buffer(bytes), ec);
    return !ec;
  }
  // Reads until `needle` has arrived, the peer closes or `timeout` passes; everything read so far.
  std::string ReadUntil(const std::string& needle, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (received_.find(needle) == std::string::npos && !closed_ && std::chrono::steady_clock::now() < deadline) {
      ReadSome(deadline);
    }
    return received_;
  }
  // Whether the server closes the connection within `timeout` (what it sent first is kept).
  bool ClosedWithin(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!closed_ && std::chrono::steady_clock::now() < deadline) ReadSome(deadline);
    return closed_;
  }
  // What has been received so far, which is then forgotten.
  std::string Take() { return std::exchange(received_, std::string()); }
  void Close() {
    boost::system::error_code ignored;
    socket_.close(ignored);
  }
  boost::asio::ip::tcp::socket& socket() { return socket_; }

 private:
  // One read that gives up at `deadline`.
  void ReadSome(std::chrono::steady_clock::time_point deadline) {
    char buf[4096];
    bool done = false;
    socket_.async_read_some(boost::asio::buffer(buf), [&](boost::system::error_code ec, size_t n) {
      done = true;
      received_.append(buf, n);
      if (ec && ec != boost::asio::error::operation_aborted) closed_ = true;
    });
    io_.restart();
    io_.run_until(deadline);
    if (!done) {
      socket_.cancel();
      io_.restart();
      io_.run();
    }
  }

  boost::asio::io_context io_;
  boost::asio::ip::tcp::socket socket_;
  bool connected_ = false;
  bool closed_ = false;
  std::string received_;
};

}  // namespace mcserve::server::testing
