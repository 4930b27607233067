#include "server/http/body_decoder.h"

#include <zlib.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace mcserve::server {
namespace {

constexpr int kGzipWindowBits = 15 + 16;  // zlib's "gzip wrapper" window bits
constexpr int kZlibWindowBits = 15;
constexpr int kRawWindowBits = -15;

// Whether two bytes open a zlib (RFC 1950) stream; HTTP's "deflate" is that, though some clients
// send a raw deflate stream.
bool IsZlibHeader(unsigned char b0, unsigned char b1) { return (b0 & 0x0f) == 8 && ((b0 << 8) | b1) % 31 == 0; }

}  // namespace

absl::StatusOr<ContentCoding> ParseContentEncoding(absl::string_view header) {
  const std::string coding = absl::AsciiStrToLower(absl::StripAsciiWhitespace(header));
  if (coding.empty() || coding == "identity") return ContentCoding::kIdentity;
  if (coding == "gzip" || coding == "x-gzip") return ContentCoding::kGzip;
  if (coding == "deflate") return ContentCoding::kDeflate;
  return absl::UnimplementedError(
      absl::StrCat("Content-Encoding \"", header, "\" is not supported (gzip, deflate or identity)"));
}

struct BodyDecoder::Inflater {
  z_stream z = {};
  std::string header;  // the first byte of a deflate body, until the second tells its wrapping
  bool started = false;
  ~Inflater() {
    if (started) inflateEnd(&z);
  }
};

BodyDecoder::BodyDecoder(ContentCoding coding, size_t max_bytes)
    : coding_(coding), max_bytes_(max_bytes), inflater_(std::make_unique<Inflater>()) {}

BodyDecoder::~BodyDecoder() = default;

absl::Status BodyDecoder::Append(absl::string_view encoded) {
  if (!error_.ok()) return error_;
  encoded_bytes_ += encoded.size();
  if (encoded_bytes_ > max_bytes_) {
    error_ =
        absl::ResourceExhaustedError(absl::StrCat("request body: larger than the limit of ", max_bytes_, " bytes"));
  } else if (coding_ == ContentCoding::kIdentity) {
    body_.append(encoded.data(), encoded.size());
  } else {
    error_ = Inflate(encoded);
  }
  return error_;
}

absl::Status BodyDecoder::StartInflater(absl::string_view first_bytes) {
  int window_bits = kGzipWindowBits;
  if (coding_ == ContentCoding::kDeflate) {
    window_bits = IsZlibHeader(static_cast<unsigned char>(first_bytes[0]), static_cast<unsigned char>(first_bytes[1]))
                      ? kZlibWindowBits
                      : kRawWindowBits;
  }
  if (inflateInit2(&inflater_->z, window_bits) != Z_OK) return absl::InternalError("zlib: inflateInit2 failed");
  inflater_->started = true;
  return absl::OkStatus();
}

absl::Status BodyDecoder::Inflate(absl::string_view encoded) {
  Inflater& in = *inflater_;
  if (!in.started) {
    in.header.append(encoded.data(), encoded.size());
    if (in.header.size() < 2) return absl::OkStatus();
    if (absl::Status s = StartInflater(in.header); !s.ok()) return s;
    std::string header = std::move(in.header);
    return Inflate(header);
  }
  z_stream& z = in.z;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(encoded.data()));
  z.avail_in = static_cast<uInt>(encoded.size());
  char out[kInflateStep];
  size_t produced = 0;
  do {
    if (stream_ended_ && z.avail_in > 0) {
      // gzip allows several members back to back; zlib and raw deflate end with their stream.
      if (coding_ != ContentCoding::kGzip)
        return absl::InvalidArgumentError("request body: bytes after the deflate stream");
      if (inflateReset(&z) != Z_OK) return absl::InternalError("zlib: inflateReset failed");
      stream_ended_ = false;
    }
    z.next_out = reinterpret_cast<Bytef*>(out);
    z.avail_out = sizeof(out);
    const int rc = inflate(&z, Z_NO_FLUSH);
    produced = sizeof(out) - z.avail_out;
    if (body_.size() + produced > max_bytes_) {
      return absl::ResourceExhaustedError(
          absl::StrCat("request body: larger than the limit of ", max_bytes_, " bytes once decompressed"));
    }
    body_.append(out, produced);
    if (rc == Z_STREAM_END) {
      stream_ended_ = true;
    } else if (rc == Z_BUF_ERROR) {
      break;  // nothing more to do without more input
    } else if (rc != Z_OK) {
      return absl::InvalidArgumentError(
          absl::StrCat("request body: corrupt compressed data (", z.msg != nullptr ? z.msg : "zlib error", ")"));
    }
  } while (z.avail_in > 0 || produced == sizeof(out));
  return absl::OkStatus();
}

absl::Status BodyDecoder::Finish() {
  if (!error_.ok()) return error_;
  if (coding_ == ContentCoding::kIdentity || encoded_bytes_ == 0) return absl::OkStatus();
  if (!stream_ended_) {
    error_ = absl::InvalidArgumentError("request body: the compressed stream is truncated");
  }
  return error_;
}

}  // namespace mcserve::server
