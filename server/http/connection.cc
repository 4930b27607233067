#include "server/http/connection.h"

#include <algorithm>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <iterator>
#include <limits>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "server/http/chat_request.h"
#include "server/http/tokenize_routes.h"

namespace mcserve::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using boost::system::error_code;

namespace {

constexpr size_t kReadPiece = 4096;                       // bytes asked of the socket per read of a head
constexpr size_t kBodyPiece = 16 << 10;                   // body bytes taken from the parser at a time
constexpr absl::Duration kLingerTime = absl::Seconds(2);  // reading what follows a refused request
constexpr int64_t kLingerBytes = 16 << 20;                // ... at most this much

absl::string_view View(beast::string_view s) { return absl::string_view(s.data(), s.size()); }

// `timeout` (> 0) as a steady_clock duration that cannot overflow a deadline.
std::chrono::steady_clock::duration Steady(absl::Duration timeout) {
  return absl::ToChronoNanoseconds(std::min(timeout, absl::Hours(24 * 365)));
}

// Whether `ec` is the HTTP parser's verdict on malformed input (rather than the socket's end).
bool IsMalformed(const error_code& ec) {
  return ec.category() == http::make_error_code(http::error::end_of_stream).category() &&
         ec != http::error::end_of_stream && ec != http::error::partial_message;
}

}  // namespace

Connection::Connection(HttpContext* context, asio::ip::tcp::socket socket)
    : context_(context),
      options_(context->options),
      strand_(socket.get_executor()),
      transport_(std::move(socket), context->tls.get()),
      read_timer_(strand_),
      write_timer_(strand_),
      buffer_(static_cast<size_t>(context->options.max_header_bytes) + kReadPiece) {}

Connection::~Connection() {
  EndCompletion();
  context_->connections.Remove(this);
}

void Connection::Start() {
  asio::dispatch(strand_, [self = shared_from_this()] {
    // The head of the first request (and the TLS handshake before it) must arrive within this.
    self->ArmRead(self->options_.header_timeout);
    self->transport_.AsyncHandshake([self](error_code ec) {
      if (self->phase_ == Phase::kClosed) return;
      if (ec) return self->CloseNow();
      self->AwaitRequest();
    });
  });
}

void Connection::Close() {
  asio::post(strand_, [self = shared_from_this()] { self->CloseNow(); });
}

void Connection::AwaitRequest() {
  phase_ = Phase::kIdle;
  if (!first_request_) ArmRead(options_.idle_timeout);
  if (read_in_flight_) return;  // the read kept pending during the last completion goes on
  if (buffer_.size() > 0) return ReadHead();
  ReadSome();
}

void Connection::ReadSome() {
  const size_t room = buffer_.max_size() - buffer_.size();
  if (read_in_flight_ || phase_ == Phase::kClosed || room == 0) return;
  read_in_flight_ = true;
  transport_.async_read_some(buffer_.prepare(std::min(room, kReadPiece)),
                             [self = shared_from_this()](error_code ec, size_t bytes) { self->OnReadSome(ec, bytes); });
}

void Connection::OnReadSome(error_code ec, size_t bytes) {
  read_in_flight_ = false;
  if (phase_ == Phase::kClosed) return;
  if (ec) return CloseNow();  // a hang-up: a completion in flight is cancelled
  buffer_.commit(bytes);
  if (phase_ == Phase::kIdle) {
    if (!first_request_) ArmRead(options_.header_timeout);
    return ReadHead();
  }
  // While busy: the client sent more (a pipelined request). It is kept for later, and no read stays
  // pending, so that the next request can be parsed once this one is answered.
}

void Connection::ReadHead() {
  phase_ = Phase::kHead;
  parser_.emplace();
  parser_->header_limit(static_cast<uint32_t>(options_.max_header_bytes));
  // The body is bounded after decoding, by the BodyDecoder. (Not boost::none: Boost 1.74 compares a
  // Content-Length against it as if it were a limit of zero.)
  parser_->body_limit(std::numeric_limits<uint64_t>::max());
  read_in_flight_ = true;
  http::async_read_header(transport_, buffer_, *parser_,
                          [self = shared_from_this()](error_code ec, size_t) { self->OnHead(ec); });
}

void Connection::OnHead(error_code ec) {
  read_in_flight_ = false;
  if (phase_ == Phase::kClosed) return;
  first_request_ = false;
  if (ec == http::error::header_limit || ec == http::error::buffer_overflow) {
    return Refuse(431, "request header fields too large");
  }
  if (IsMalformed(ec)) return Refuse(400, absl::StrCat("malformed request: ", ec.message()));
  if (ec) return CloseNow();
  const auto& request = parser_->get();
  minor_version_ = request.version() == 10 ? 0 : 1;
  keep_alive_ = request.keep_alive();
  if (std::distance(request.begin(), request.end()) > options_.max_headers) {
    return Refuse(431, absl::StrCat("more than ", options_.max_headers, " header fields"));
  }
  head_only_ = request.method() == http::verb::head;
  route_ = RouteOf(head_only_ ? http::verb::get : request.method(), View(request.target()));
  caller_.clear();
  if (route_ != Route::kHealth && route_ != Route::kReady && options_.api_keys.enabled()) {
    std::optional<std::string> name = options_.api_keys.Authenticate(View(request[http::field::authorization]));
    if (!name.has_value()) {
      if (options_.accounting != nullptr) options_.accounting->Unauthenticated();
      return Refuse(401, "missing or wrong API key", "authentication_error");
    }
    caller_ = std::move(*name);
  }
  if (parser_->is_done()) return Dispatch(std::string());
  const auto length = parser_->content_length();
  if (length.has_value() && *length > static_cast<uint64_t>(options_.max_body_bytes)) {
    return Refuse(
        413, absl::StrCat("request body: ", *length, " bytes is more than the limit of ", options_.max_body_bytes));
  }
  auto coding = ParseContentEncoding(View(request[http::field::content_encoding]));
  if (!coding.ok()) return Refuse(415, coding.status().message());
  decoder_ = std::make_unique<BodyDecoder>(*coding, static_cast<size_t>(options_.max_body_bytes));
  if (beast::iequals(request[http::field::expect], "100-continue")) {
    return Write(std::string(kContinue), Then::kReadBody);
  }
  StartBody();
}

Connection::Route Connection::RouteOf(http::verb method, absl::string_view target) {
  struct Entry {
    absl::string_view path;
    http::verb method;
    Route route;
  };
  static constexpr Entry kRoutes[] = {
      {"/health", http::verb::get, Route::kHealth},
      {"/ready", http::verb::get, Route::kReady},
      {"/metrics", http::verb::get, Route::kMetrics},
      {"/v1/models", http::verb::get, Route::kModels},
      {"/v1/completions", http::verb::post, Route::kCompletions},
      {"/v1/chat/completions", http::verb::post, Route::kChatCompletions},
      {"/tokenize", http::verb::post, Route::kTokenize},
      {"/detokenize", http::verb::post, Route::kDetokenize},
      {"/version", http::verb::get, Route::kVersion},
  };
  const absl::string_view path = target.substr(0, target.find('?'));
  for (const Entry& e : kRoutes) {
    if (e.path == path) return e.method == method ? e.route : Route::kWrongMethod;
  }
  return Route::kNotFound;
}

void Connection::StartBody() {
  phase_ = Phase::kBody;
  ArmRead(options_.body_timeout);
  piece_.resize(kBodyPiece);
  ReadBodyPiece();
}

void Connection::ReadBodyPiece() {
  auto& body = parser_->get().body();
  body.data = piece_.data();
  body.size = piece_.size();
  read_in_flight_ = true;
  http::async_read(transport_, buffer_, *parser_,
                   [self = shared_from_this()](error_code ec, size_t) { self->OnBodyPiece(ec); });
}

void Connection::OnBodyPiece(error_code ec) {
  read_in_flight_ = false;
  if (phase_ == Phase::kClosed) return;
  if (ec == http::error::need_buffer) ec = {};
  if (IsMalformed(ec)) return Refuse(400, absl::StrCat("malformed request body: ", ec.message()));
  if (ec) return CloseNow();
  const size_t got = piece_.size() - parser_->get().body().size;
  if (absl::Status s = decoder_->Append(absl::string_view(piece_.data(), got)); !s.ok()) return RefuseBody(s);
  if (!parser_->is_done()) return ReadBodyPiece();
  if (absl::Status s = decoder_->Finish(); !s.ok()) return RefuseBody(s);
  std::vector<char>().swap(piece_);
  Dispatch(decoder_->TakeBody());
}

void Connection::Dispatch(std::string body) {
  phase_ = Phase::kBusy;
  DisarmRead();
  parser_.reset();
  decoder_.reset();
  switch (route_) {
    case Route::kHealth:
      return Respond({.body = "ok\n"});
    case Route::kReady: {
      const bool ready = context_->admitting.load() && (!options_.ready || options_.ready());
      return Respond({.status = ready ? 200 : 503, .body = ready ? "ready\n" : "not ready\n"});
    }
    case Route::kMetrics:
      if (!options_.metrics) return Respond(ErrorResponse(404, "no metrics", "invalid_request_error"));
      return Respond({.content_type = "text/plain; version=0.0.4; charset=utf-8", .body = options_.metrics()});
    case Route::kModels: {
      const nlohmann::json model = {{"id", options_.model_name},
                                    {"object", "model"},
                                    {"created", absl::ToUnixSeconds(absl::Now())},
                                    {"owned_by", "mcserve"}};
      return Respond(
          {.content_type = "application/json", .body = nlohmann::json{{"object", "list"}, {"data", {model}}}.dump()});
    }
    case Route::kVersion:
      return Respond(VersionResponse(options_.version));
    case Route::kCompletions:
      return StartCompletion(std::move(body), /*chat=*/false);
    case Route::kChatCompletions:
      return StartCompletion(std::move(body), /*chat=*/true);
    case Route::kTokenize:
    case Route::kDetokenize:
      return StartTokenizer(std::move(body));
    case Route::kWrongMethod:
      return Respond(ErrorResponse(405, "method not allowed on this route", "invalid_request_error"));
    case Route::kNotFound:
      return Respond(ErrorResponse(404, "no such route", "invalid_request_error"));
  }
}

void Connection::StartTokenizer(std::string body) {
  const bool tokenize = route_ == Route::kTokenize;
  asio::post(*context_->parse_pool, [self = shared_from_this(), body = std::move(body), tokenize] {
    const engine::RequestLimits& limits = self->context_->engine->limits();
    const TokenizeContext context{.tokenizer = self->context_->tokenizer,
                                  .chat = &self->options_.chat,
                                  .model_name = self->options_.model_name,
                                  .vocab_size = limits.vocab_size,
                                  .max_model_len = limits.max_positions > 0 ? limits.max_positions
                                                                            : limits.max_prompt_tokens};
    Response response = tokenize ? TokenizeResponse(body, context) : DetokenizeResponse(body, context);
    asio::post(self->strand_, [self, response = std::move(response)]() mutable {
      if (self->phase_ != Phase::kClosed) self->Respond(std::move(response));
    });
  });
}

void Connection::StartCompletion(std::string body, bool chat) {
  if (!context_->admitting.load()) {
    return Respond(ErrorResponse(503, "the server is shutting down and admits no new completions", "server_error",
                                 /*close=*/true));
  }
  // JSON and tokenization take up to seconds for a large prompt: off the I/O threads.
  asio::post(*context_->parse_pool, [self = shared_from_this(), body = std::move(body), chat] {
    const CompletionLimits limits{.rules = self->context_->engine->limits(),
                                  .default_max_tokens = self->options_.default_max_tokens};
    auto parsed = chat ? ParseChatRequest(body, *self->context_->tokenizer, limits, self->options_.chat)
                       : ParseCompletionRequest(body, *self->context_->tokenizer, limits);
    asio::post(self->strand_, [self, parsed = std::move(parsed)]() mutable { self->Submit(std::move(parsed)); });
  });
}

void Connection::Submit(absl::StatusOr<CompletionRequest> parsed) {
  if (phase_ == Phase::kClosed) return;
  if (!parsed.ok()) {
    const auto [status, type] = HttpStatusOf(parsed.status());
    return Respond(ErrorResponse(status, parsed.status().message(), type));
  }
  if (!parsed->model.empty() && parsed->model != options_.model_name) {
    return Respond(
        ErrorResponse(404, absl::StrCat("model \"", parsed->model, "\" is not served here (", options_.model_name, ")"),
                      "invalid_request_error"));
  }
  const OutputOptions output_options{.logprobs = parsed->spec.sampling.logprobs > 0,
                                     .stream = parsed->stream,
                                     .include_usage = parsed->include_usage};
  CompletionResult result{.model = options_.model_name,
                          .created = absl::ToUnixSeconds(absl::Now()),
                          .chat = parsed->chat,
                          .echo_text = std::move(parsed->echo_text),
                          .choices = std::vector<ChoiceResult>(static_cast<size_t>(parsed->n)),
                          .prompt_tokens = static_cast<int64_t>(parsed->spec.prompt.size())};
  if (parsed->n > 1) other_choices_ = parsed->spec;
  auto submitted = context_->engine->Submit(std::move(parsed->spec));
  if (!submitted.ok()) {
    other_choices_.reset();
    const auto [status, type] = HttpStatusOf(submitted.status());
    return Respond(ErrorResponse(status, submitted.status().message(), type));
  }
  handles_.push_back(std::move(*submitted));
  ++context_->active_requests;
  // No pending operation may hold the connection while the engine works (a non-streamed reply with
  // pipelined bytes waiting has none): it holds itself until EndCompletion.
  self_while_generating_ = shared_from_this();
  result.id = absl::StrCat(result.chat ? "chatcmpl-" : "cmpl-", handles_[0]->id());
  output_ = std::make_unique<CompletionOutput>(std::move(result), context_->tokenizer, output_options);
  Listen(*handles_[0]);
  // A hang-up shows as the end of a pending read. (Not with pipelined bytes already here: the next
  // request must be parsed from them first once this one is answered.)
  if (buffer_.size() == 0) ReadSome();
  if (!output_options.stream) return;
  std::string head = EventStreamHead(minor_version_, !keep_alive_);
  if (minor_version_ >= 1) {
    AppendChunk(output_->Start(), &head);
  } else {
    head += output_->Start();
  }
  Write(std::move(head), Then::kPump);
}

void Connection::Listen(engine::RequestHandle& handle) {
  // The engine calls this on its loop thread: it must not block, and holds no strong reference
  // (the connection is never destroyed there).
  handle.OnOutput([weak = weak_from_this(), strand = strand_] {
    asio::post(strand, [weak] {
      if (auto self = weak.lock()) self->Pump();
    });
  });
}

void Connection::SubmitOtherChoices(std::string* sse) {
  engine::RequestSpec spec = std::move(*other_choices_);
  other_choices_.reset();
  for (int i = 1; i < output_->choices(); ++i) {
    auto submitted = context_->engine->Submit(spec);
    if (!submitted.ok()) {
      // This choice fails alone (its final event says why); the others go on.
      output_->Add(i, engine::FinalEvent(engine::FinishReason::kError, submitted.status()), sse);
      handles_.push_back(nullptr);
      continue;
    }
    handles_.push_back(std::move(*submitted));
    Listen(*handles_.back());
  }
}

void Connection::Pump() {
  if (phase_ == Phase::kClosed || write_in_flight_ || output_ == nullptr) return;
  std::string sse;
  bool write_timed_out = false;
  for (bool progress = true; progress && !output_->finished();) {
    progress = false;
    for (size_t i = 0; i < handles_.size() && !output_->finished(); ++i) {
      if (handles_[i] == nullptr || output_->finished(static_cast<int>(i))) continue;
      std::optional<engine::OutputEvent> event = handles_[i]->TryNext();
      if (!event.has_value()) continue;
      progress = true;
      // The engine gave up on a client that read nothing for its write timeout: nothing more to say.
      write_timed_out |= event->finish == engine::FinishReason::kCancelled && absl::IsDeadlineExceeded(event->error);
      output_->Add(static_cast<int>(i), *event, &sse);
      // Choice 0's first event: its prompt is prefilled (and its blocks cached) — the others may start.
      if (i == 0 && other_choices_.has_value()) SubmitOtherChoices(&sse);
    }
  }
  if (write_timed_out) return CloseNow();
  const bool chunked = minor_version_ >= 1;
  std::string wire;
  if (chunked) {
    AppendChunk(sse, &wire);
  } else {
    wire = std::move(sse);
  }
  if (!output_->finished()) {
    if (!wire.empty()) Write(std::move(wire), Then::kPump);
    return;
  }
  EndCompletion();
  std::unique_ptr<CompletionOutput> output = std::move(output_);
  if (!output->stream()) return Respond(output->Finished());
  if (chunked) absl::StrAppend(&wire, kLastChunk);
  Write(std::move(wire), keep_alive_ && chunked ? Then::kAwaitRequest : Then::kClose);
}

void Connection::EndCompletion() {
  if (handles_.empty()) return;
  for (size_t i = 0; i < handles_.size(); ++i) {
    if (handles_[i] == nullptr) continue;
    handles_[i]->OnOutput(nullptr);
    if (!output_->finished(static_cast<int>(i))) handles_[i]->Abort();
  }
  const bool finished = output_->finished();
  if (options_.accounting != nullptr) {
    options_.accounting->RequestFinished(caller_, finished ? output_->finish() : engine::FinishReason::kCancelled,
                                         output_->prompt_tokens(), output_->generated_tokens());
  }
  --context_->active_requests;
  handles_.clear();
  other_choices_.reset();
  self_while_generating_.reset();  // never the last reference: every caller holds one
}

void Connection::Respond(Response response, Then then) {
  if (!keep_alive_) response.close = true;
  if (response.close && then == Then::kAwaitRequest) then = Then::kClose;
  std::string wire = Serialize(response, minor_version_);
  if (head_only_) wire.resize(wire.size() - response.body.size());  // HEAD: the GET's head alone
  Write(std::move(wire), then);
}

void Connection::Refuse(int status, absl::string_view message, const char* type) {
  phase_ = Phase::kBusy;
  DisarmRead();
  Respond(ErrorResponse(status, message, type, /*close=*/true), Then::kLingerClose);
}

void Connection::RefuseBody(const absl::Status& status) {
  const int code = absl::IsResourceExhausted(status) ? 413 : absl::IsUnimplemented(status) ? 415 : 400;
  Refuse(code, status.message());
}

void Connection::Write(std::string bytes, Then then) {
  out_ = std::move(bytes);
  written_ = 0;
  then_ = then;
  write_in_flight_ = true;
  WriteSome();
}

// The write deadline restarts with each piece the client takes: a slow reader that keeps reading
// is not cut off, one that stops is.
void Connection::WriteSome() {
  ArmWrite(options_.write_timeout);
  transport_.async_write_some(asio::buffer(out_.data() + written_, out_.size() - written_),
                              [self = shared_from_this()](error_code ec, size_t bytes) {
                                self->written_ += bytes;
                                if (!ec && self->phase_ != Phase::kClosed && self->written_ < self->out_.size()) {
                                  return self->WriteSome();
                                }
                                self->OnWritten(ec);
                              });
}

void Connection::OnWritten(error_code ec) {
  write_in_flight_ = false;
  DisarmWrite();
  if (phase_ == Phase::kClosed) return;
  if (ec) return CloseNow();
  std::string().swap(out_);
  switch (then_) {
    case Then::kAwaitRequest:
      return AwaitRequest();
    case Then::kClose:
      return CloseNow();
    case Then::kLingerClose:
      return LingerClose();
    case Then::kReadBody:
      return StartBody();
    case Then::kPump:
      return Pump();
  }
}

// After a refusal the client may still be sending what it had started: read and drop it for a
// moment, so that closing does not reset the connection before the client has read the answer.
void Connection::LingerClose() {
  if (read_in_flight_) return CloseNow();
  phase_ = Phase::kLinger;
  transport_.ShutdownSend();
  ArmRead(kLingerTime);
  piece_.resize(kBodyPiece);
  Discard();
}

void Connection::Discard() {
  read_in_flight_ = true;
  transport_.socket().async_read_some(asio::buffer(piece_), [self = shared_from_this()](error_code ec, size_t n) {
    self->read_in_flight_ = false;
    if (self->phase_ == Phase::kClosed) return;
    self->lingered_bytes_ += static_cast<int64_t>(n);
    if (ec || self->lingered_bytes_ > kLingerBytes) return self->CloseNow();
    self->Discard();
  });
}

void Connection::CloseNow() {
  if (phase_ == Phase::kClosed) return;
  phase_ = Phase::kClosed;
  EndCompletion();
  output_.reset();
  read_timer_.cancel();
  write_timer_.cancel();
  transport_.Close();
}

void Connection::ArmRead(absl::Duration timeout) { Arm(read_timer_, timeout); }
void Connection::ArmWrite(absl::Duration timeout) { Arm(write_timer_, timeout); }

void Connection::Arm(asio::steady_timer& timer, absl::Duration timeout) {
  if (timeout <= absl::ZeroDuration() || timeout == absl::InfiniteDuration()) {
    timer.expires_at(asio::steady_timer::time_point::max());  // no deadline
    return;
  }
  timer.expires_after(Steady(timeout));  // cancels the wait of an earlier deadline
  timer.async_wait([self = shared_from_this(), &timer](error_code ec) {
    // A deadline moved or lifted after it had fired but before this ran is not reached.
    if (ec || self->phase_ == Phase::kClosed || timer.expiry() > std::chrono::steady_clock::now()) return;
    self->CloseNow();
  });
}

void Connection::DisarmRead() { read_timer_.expires_at(asio::steady_timer::time_point::max()); }
void Connection::DisarmWrite() { write_timer_.expires_at(asio::steady_timer::time_point::max()); }

}  // namespace mcserve::server
