// BodyDecoder: identity, gzip and deflate bodies within the limit decode exactly whatever the piece
// sizes; bodies over the limit are refused with at most the limit kept and little more inflated; a
// gzip bomb of 1 GB of zeros is refused after reading a few KB of it; corrupt, truncated and
// trailing data and unknown codings are named.
#include "server/http/body_decoder.h"

#include <zlib.h>

#include <random>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace mcserve::server {
namespace {

constexpr size_t kLimit = 1 << 20;

// `text` compressed with zlib at `window_bits` (31: gzip, 15: zlib, -15: raw deflate).
std::string Compress(const std::string& text, int window_bits) {
  z_stream z = {};
  EXPECT_EQ(deflateInit2(&z, Z_BEST_COMPRESSION, Z_DEFLATED, window_bits, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, text.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// Text that compresses a little (random words), `bytes` long.
std::string Text(size_t bytes) {
  static const char* kWords[] = {"the ", "cat ", "watched ", "gulls ", "over ", "a ", "grey ", "sea. "};
  std::mt19937 rng(7);
  std::string s;
  while (s.size() < bytes) s += kWords[rng() % 8];
  s.resize(bytes);
  return s;
}

// Feeds `encoded` in pieces of `piece` bytes; the first error, or Finish's status.
absl::Status Feed(BodyDecoder& d, const std::string& encoded, size_t piece) {
  for (size_t at = 0; at < encoded.size(); at += piece) {
    if (absl::Status s = d.Append(absl::string_view(encoded).substr(at, piece)); !s.ok()) return s;
  }
  return d.Finish();
}

TEST(BodyDecoderTest, EveryCodingWithinTheLimitDecodesExactly) {
  const std::string text = Text(kLimit);  // exactly at the limit
  const std::pair<ContentCoding, std::string> cases[] = {
      {ContentCoding::kIdentity, text},
      {ContentCoding::kGzip, Compress(text, 31)},
      {ContentCoding::kDeflate, Compress(text, 15)},
      {ContentCoding::kDeflate, Compress(text, -15)},
  };
  for (const auto& [coding, encoded] : cases) {
    for (size_t piece : {size_t{1}, size_t{7}, size_t{4096}, encoded.size()}) {
      if (piece == 1 && encoded.size() > 200000) continue;  // byte by byte only where it stays quick
      BodyDecoder d(coding, kLimit);
      ASSERT_TRUE(Feed(d, encoded, piece).ok()) << static_cast<int>(coding) << " piece " << piece;
      EXPECT_TRUE(d.body() == text) << static_cast<int>(coding) << " piece " << piece;
    }
  }
  BodyDecoder small(ContentCoding::kGzip, kLimit);
  ASSERT_TRUE(Feed(small, Compress("x", 31), 1).ok());
  EXPECT_EQ(small.body(), "x");
}

TEST(BodyDecoderTest, ConcatenatedGzipMembersDecodeToTheirConcatenation) {
  BodyDecoder d(ContentCoding::kGzip, kLimit);
  ASSERT_TRUE(Feed(d, Compress("hello ", 31) + Compress("world", 31), 3).ok());
  EXPECT_EQ(d.body(), "hello world");
}

TEST(BodyDecoderTest, EachCodingOverTheLimitIsRefusedKeepingAtMostTheLimit) {
  const std::string text = Text(kLimit + 1);
  const std::pair<ContentCoding, std::string> cases[] = {
      {ContentCoding::kIdentity, text},
      {ContentCoding::kGzip, Compress(text, 31)},
      {ContentCoding::kDeflate, Compress(text, 15)},
  };
  for (const auto& [coding, encoded] : cases) {
    BodyDecoder d(coding, kLimit);
    const absl::Status s = Feed(d, encoded, 1000);
    EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << static_cast<int>(coding) << " " << s;
    EXPECT_LE(d.body().size(), kLimit);
    EXPECT_EQ(d.Append("more").code(), absl::StatusCode::kResourceExhausted);  // stays refused
  }
}

TEST(BodyDecoderTest, EncodedBytesCountAgainstTheLimitToo) {
  // Empty stored deflate blocks decode to nothing; an endless run of them must still end.
  std::string empty_blocks;
  for (int i = 0; i < 3000; ++i) empty_blocks += std::string("\x00\x00\x00\xff\xff", 5);
  BodyDecoder d(ContentCoding::kDeflate, 10000);
  EXPECT_EQ(Feed(d, empty_blocks, 512).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(d.body(), "");
}

TEST(BodyDecoderTest, AGigabyteGzipBombIsRefusedAfterAFewKilobytes) {
  // 1 GiB of zeros compressed in a stream (about 1 MB); fed in 1 KiB pieces the way a socket would.
  z_stream z = {};
  ASSERT_EQ(deflateInit2(&z, Z_BEST_COMPRESSION, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY), Z_OK);
  const std::string zeros(1 << 20, '\0');
  std::string bomb;
  char out[1 << 16];
  for (int mib = 0; mib < 1024; ++mib) {
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(zeros.data()));
    z.avail_in = static_cast<uInt>(zeros.size());
    const int flush = mib == 1023 ? Z_FINISH : Z_NO_FLUSH;
    do {
      z.next_out = reinterpret_cast<Bytef*>(out);
      z.avail_out = sizeof(out);
      deflate(&z, flush);
      bomb.append(out, sizeof(out) - z.avail_out);
    } while (z.avail_out == 0);
  }
  deflateEnd(&z);
  ASSERT_EQ(z.total_in, uLong{1} << 30);
  BodyDecoder d(ContentCoding::kGzip, 4 << 20);
  size_t fed = 0;
  absl::Status s;
  for (; fed < bomb.size() && s.ok(); fed += 1024) s = d.Append(absl::string_view(bomb).substr(fed, 1024));
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_LE(d.body().size(), size_t{4} << 20);
  // About 1030:1, so 4 MiB of output needs about 4 KB of input; refused well before 1% of the bomb.
  EXPECT_LT(fed, bomb.size() / 100) << "fed " << fed << " of " << bomb.size();
}

TEST(BodyDecoderTest, CorruptTruncatedAndTrailingDataAreNamed) {
  const std::string gzip = Compress(Text(5000), 31);
  BodyDecoder corrupt(ContentCoding::kGzip, kLimit);
  EXPECT_EQ(Feed(corrupt, "this is not gzip", 4).code(), absl::StatusCode::kInvalidArgument);
  BodyDecoder truncated(ContentCoding::kGzip, kLimit);
  const absl::Status t = Feed(truncated, gzip.substr(0, gzip.size() / 2), 100);
  EXPECT_EQ(t.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(t.message(), "truncated")) << t;
  BodyDecoder one_byte(ContentCoding::kDeflate, kLimit);
  EXPECT_EQ(Feed(one_byte, "x", 1).code(), absl::StatusCode::kInvalidArgument);
  BodyDecoder trailing(ContentCoding::kDeflate, kLimit);
  EXPECT_EQ(Feed(trailing, Compress("abc", 15) + "junk", 100).code(), absl::StatusCode::kInvalidArgument);
  BodyDecoder empty(ContentCoding::kGzip, kLimit);
  EXPECT_TRUE(empty.Finish().ok());
  EXPECT_EQ(empty.body(), "");
}

TEST(BodyDecoderTest, ContentEncodingNames) {
  EXPECT_EQ(*ParseContentEncoding(""), ContentCoding::kIdentity);
  EXPECT_EQ(*ParseContentEncoding("Identity"), ContentCoding::kIdentity);
  EXPECT_EQ(*ParseContentEncoding(" GZIP "), ContentCoding::kGzip);
  EXPECT_EQ(*ParseContentEncoding("x-gzip"), ContentCoding::kGzip);
  EXPECT_EQ(*ParseContentEncoding("deflate"), ContentCoding::kDeflate);
  for (const char* unsupported : {"br", "zstd", "gzip, gzip", "compress"}) {
    EXPECT_EQ(ParseContentEncoding(unsupported).status().code(), absl::StatusCode::kUnimplemented) << unsupported;
  }
}

}  // namespace
}  // namespace mcserve::server
