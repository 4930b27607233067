#include "server/http/responses.h"

#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "server/http/completion_json.h"

namespace mcserve::server {

namespace http = boost::beast::http;

namespace {

constexpr char kServerName[] = "mcserve";

}  // namespace

std::string Serialize(const Response& r, int minor_version) {
  http::response<http::string_body> res{static_cast<http::status>(r.status), 10 + minor_version};
  res.set(http::field::server, kServerName);
  res.set(http::field::content_type, r.content_type);
  res.body() = r.body;
  res.keep_alive(!r.close);
  res.prepare_payload();
  std::ostringstream out;
  out << res;
  return std::move(out).str();
}

Response ErrorResponse(int status, absl::string_view message, const char* type, bool close) {
  return Response{.status = status,
                  .content_type = "application/json",
                  .body = ErrorJson(std::string(message), type, status),
                  .close = close};
}

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

std::string EventStreamHead(int minor_version, bool close) {
  http::response<http::empty_body> res{http::status::ok, 10 + minor_version};
  res.set(http::field::server, kServerName);
  res.set(http::field::content_type, "text/event-stream");
  res.set(http::field::cache_control, "no-cache");
  const bool chunked = minor_version >= 1;
  if (chunked) res.chunked(true);
  res.keep_alive(chunked && !close);
  std::ostringstream out;
  out << res.base();
  return std::move(out).str();
}

void AppendChunk(absl::string_view data, std::string* out) {
  if (data.empty()) return;
  absl::StrAppend(out, absl::Hex(data.size()), "\r\n", data, "\r\n");
}

}  // namespace mcserve::server
