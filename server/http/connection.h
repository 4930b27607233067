// Connection: one accepted HTTP/1.x connection (plain or TLS), served on its own strand with no
// thread of its own. Per request: reads the head (bounded in size, field count and time),
// authenticates it before any body byte is read, reads the body through a BodyDecoder (bounded
// after decompression), answers the route. A completion's output is pushed by the engine (the
// listener posts to the strand) and pulled only while no write is in flight, so a client that stops
// reading leaves the engine's bounded channel full. While a completion runs a read stays pending:
// a hang-up cancels it. Deadlines (head, body, idle, a write making no progress) close the connection.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "engine/serving/request.h"
#include "server/http/body_decoder.h"
#include "server/http/completion_output.h"
#include "server/http/http_context.h"
#include "server/http/responses.h"
#include "server/http/transport.h"

namespace mcserve::server {

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  // `socket`'s executor must be a strand of the server's io_context; `context` must outlive this.
  Connection(HttpContext* context, boost::asio::ip::tcp::socket socket);
  // Leaves the registry; a completion still attached is cancelled.
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Starts serving: the TLS handshake, then requests. Once, from any thread.
  void Start();
  // Closes the connection and cancels its completion, if any. Any thread (runs on the strand).
  void Close();
  // The same at once on the calling thread: only while no thread runs the io_context.
  void CloseWhileStopped() { CloseNow(); }

 private:
  enum class Phase { kHandshake, kIdle, kHead, kBody, kBusy, kLinger, kClosed };
  // What follows a write once the client has taken it.
  enum class Then { kAwaitRequest, kClose, kLingerClose, kReadBody, kPump };
  enum class Route {
    kHealth, kReady, kMetrics, kModels, kVersion, kCompletions, kChatCompletions, kTokenize, kDetokenize,
    kNotFound, kWrongMethod
  };

  // Reading a request (strand).
  void AwaitRequest();
  void ReadSome();
  void OnReadSome(boost::system::error_code ec, size_t bytes);
  void ReadHead();
  void OnHead(boost::system::error_code ec);
  void StartBody();
  void ReadBodyPiece();
  void OnBodyPiece(boost::system::error_code ec);
  void Dispatch(std::string body);
  static Route RouteOf(boost::beast::http::verb method, absl::string_view target);

  // The tokenizer routes: answered from the parse pool (tokenizing takes time).
  void StartTokenizer(std::string body);

  // Completions (strand). Choice 0 is submitted at once; the other n − 1 once its first event shows
  // its prompt prefilled, so that they resume from the prefix cache's blocks of that prompt.
  void StartCompletion(std::string body, bool chat);
  void Submit(absl::StatusOr<CompletionRequest> parsed);
  void SubmitOtherChoices(std::string* sse);
  void Pump();
  void EndCompletion();
  // Posts Pump to the strand whenever `handle` has output (from the engine's loop thread).
  void Listen(engine::RequestHandle& handle);

  // Writing and closing (strand).
  void Respond(Response response, Then then = Then::kAwaitRequest);
  void Refuse(int status, absl::string_view message, const char* type = "invalid_request_error");
  void RefuseBody(const absl::Status& status);
  void Write(std::string bytes, Then then);
  void WriteSome();
  void OnWritten(boost::system::error_code ec);
  void LingerClose();
  void Discard();
  void CloseNow();

  // Deadlines: reaching one closes the connection (strand).
  void ArmRead(absl::Duration timeout);
  void DisarmRead();
  void ArmWrite(absl::Duration timeout);
  void DisarmWrite();
  void Arm(boost::asio::steady_timer& timer, absl::Duration timeout);

  HttpContext* const context_;
  const HttpServerOptions& options_;
  const boost::asio::any_io_executor strand_;
  Transport transport_;
  boost::asio::steady_timer read_timer_, write_timer_;
  Phase phase_ = Phase::kHandshake;
  bool first_request_ = true;
  bool read_in_flight_ = false, write_in_flight_ = false;

  // The request being read.
  boost::beast::flat_buffer buffer_;  // bytes read and not yet parsed (the head, pipelined data)
  std::optional<boost::beast::http::request_parser<boost::beast::http::buffer_body>> parser_;
  std::unique_ptr<BodyDecoder> decoder_;
  std::vector<char> piece_;  // the parser's destination for body bytes (and for discarded bytes)
  Route route_ = Route::kNotFound;
  int minor_version_ = 1;
  bool keep_alive_ = true;
  bool head_only_ = false;  // a HEAD request: answered as GET without the body
  std::string caller_;      // the API key's name ("" without keys)
  int64_t lingered_bytes_ = 0;

  // The completion being answered: one handle per choice submitted so far.
  std::vector<std::shared_ptr<engine::RequestHandle>> handles_;
  std::optional<engine::RequestSpec> other_choices_;  // the spec the other n − 1 choices wait to run
  std::unique_ptr<CompletionOutput> output_;
  std::shared_ptr<Connection> self_while_generating_;

  std::string out_;     // the bytes of the write in flight
  size_t written_ = 0;  // ... of which the client has taken this many
  Then then_ = Then::kAwaitRequest;
};

}  // namespace mcserve::server
