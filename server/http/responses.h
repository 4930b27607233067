// The bytes of HTTP/1.x responses: whole responses with a body, the head of a server-sent-event
// stream and its chunk framing, and the OpenAI-style error response for a status. Pure functions;
// any thread.
#pragma once

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace mcserve::server {

// A response with its whole body.
struct Response {
  int status = 200;
  std::string content_type = "text/plain";
  std::string body;
  bool close = false;  // `Connection: close`: the connection ends after this response
};

// HTTP/1.`minor_version` wire bytes of `r`, Content-Length framed; `Connection: close` when
// `r.close` (else keep-alive, as the version implies it).
std::string Serialize(const Response& r, int minor_version);

// A JSON error response {"error": {"message", "type", "param", "code"}}.
Response ErrorResponse(int status, absl::string_view message, const char* type, bool close = false);

// The HTTP status and OpenAI error type for an engine or request error.
std::pair<int, const char*> HttpStatusOf(const absl::Status& s);

// The head of a `text/event-stream` response: chunked for HTTP/1.1, else delimited by closing the
// connection (`close` is then implied).
std::string EventStreamHead(int minor_version, bool close);

// Appends `data` to `out` as one chunk of chunked transfer coding (nothing for empty data).
void AppendChunk(absl::string_view data, std::string* out);
// The last chunk of chunked transfer coding (no trailers).
inline constexpr absl::string_view kLastChunk = "0\r\n\r\n";
// The interim response that tells a client sending `Expect: 100-continue` to send its body.
inline constexpr absl::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

}  // namespace mcserve::server
