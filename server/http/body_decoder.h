// BodyDecoder: a request body decoded as its pieces arrive (Content-Encoding identity, gzip or
// deflate), never holding more than a bound of decoded bytes: a compressed body is inflated in
// bounded steps, and the first step that would pass the bound refuses the body. Chunked transfer
// coding is the HTTP parser's; this sees the payload only.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mcserve::server {

enum class ContentCoding { kIdentity, kGzip, kDeflate };

// The coding a `Content-Encoding` header value names ("" and "identity": identity; gzip, x-gzip,
// deflate; case-insensitive). Unimplemented (→ 415) for any other value or a list of codings. Any
// thread.
absl::StatusOr<ContentCoding> ParseContentEncoding(absl::string_view header);

// One body's decoder; one thread at a time.
class BodyDecoder {
 public:
  // Bytes inflated per zlib call: the most a compressed body decodes past the bound before refusal.
  static constexpr size_t kInflateStep = 16 * 1024;

  // Refuses bodies whose encoded or decoded size passes `max_bytes`.
  BodyDecoder(ContentCoding coding, size_t max_bytes);
  ~BodyDecoder();
  BodyDecoder(const BodyDecoder&) = delete;
  BodyDecoder& operator=(const BodyDecoder&) = delete;

  // Decodes the next piece of the payload. ResourceExhausted (→ 413) once the encoded or decoded
  // bytes pass the bound (what would pass it is not kept); InvalidArgument (→ 400) for corrupt
  // compressed data or bytes after its end. After an error every call fails.
  absl::Status Append(absl::string_view encoded);
  // The payload is complete: InvalidArgument when a compressed stream stopped short.
  absl::Status Finish();

  // The decoded bytes so far.
  const std::string& body() const { return body_; }
  // The decoded bytes, moved out (the decoder is then spent).
  std::string TakeBody() { return std::move(body_); }
  // Encoded bytes taken so far.
  size_t encoded_bytes() const { return encoded_bytes_; }

 private:
  absl::Status Inflate(absl::string_view encoded);
  absl::Status StartInflater(absl::string_view first_bytes);

  struct Inflater;
  const ContentCoding coding_;
  const size_t max_bytes_;
  std::unique_ptr<Inflater> inflater_;  // compressed codings, from the first byte on
  std::string body_;
  size_t encoded_bytes_ = 0;
  bool stream_ended_ = false;  // the compressed stream's end was seen
  absl::Status error_;
};

}  // namespace mcserve::server
