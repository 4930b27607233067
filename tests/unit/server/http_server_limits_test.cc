// The HTTP server's limits on what a client sends, over loopback: compressed bodies are inflated
// (and refused past the limit, however small on the wire), the API key is checked before any body
// byte is read, chunked bodies count against the limit, heads are bounded in size, field count and
// time, idle keep-alive connections are closed, and `Expect: 100-continue` is honoured.
#include <zlib.h>

#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/unit/server/http_server_fixture.h"

namespace mcserve::server::testing {
namespace {

constexpr int64_t kLimit = 64 << 10;

// `text` gzip-compressed (window_bits 31) or zlib-wrapped (15).
std::string Compress(const std::string& text, int window_bits) {
  z_stream z = {};
  deflateInit2(&z, Z_BEST_COMPRESSION, Z_DEFLATED, window_bits, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&z, text.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// The status code of the first response in `bytes` (0 when there is none).
int StatusOf(const std::string& bytes) {
  if (!absl::StartsWith(bytes, "HTTP/1.1 ") || bytes.size() < 12) return 0;
  return std::stoi(bytes.substr(9, 3));
}

class HttpServerLimitsTest : public HttpServerFixture {
 protected:
  void SetUp() override {
    Serve([](HttpServerOptions& o) {
      o.max_body_bytes = kLimit;
      o.max_header_bytes = 4096;
      o.max_headers = 20;
      o.header_timeout = absl::Milliseconds(500);
      o.idle_timeout = absl::Milliseconds(500);
    });
  }
};

TEST_F(HttpServerLimitsTest, GzipAndDeflateBodiesAreInflated) {
  const std::string json = R"({"prompt": "The cat watched", "max_tokens": 3, "ignore_eos": true})";
  for (const auto& [coding, bits] : {std::pair{"gzip", 31}, std::pair{"deflate", 15}}) {
    const HttpReply r = Post(port(), "/v1/completions", Compress(json, bits), {{"Content-Encoding", coding}});
    EXPECT_EQ(r.status, 200) << coding << ": " << r.body << r.error;
    EXPECT_TRUE(absl::StrContains(r.body, "\"completion_tokens\":3")) << r.body;
  }
  const HttpReply br = Post(port(), "/v1/completions", json, {{"Content-Encoding", "br"}});
  EXPECT_EQ(br.status, 415) << br.body;
}

TEST_F(HttpServerLimitsTest, ACompressedBombIsRefusedAfterTheLimit) {
  // 64 MiB of spaces inside a JSON string: about 64 KB compressed, 1000 times the limit inflated.
  const std::string bomb = Compress(absl::StrCat(R"({"prompt": ")", std::string(64 << 20, ' '), R"("})"), 31);
  const HttpReply r = Post(port(), "/v1/completions", bomb, {{"Content-Encoding", "gzip"}});
  EXPECT_EQ(r.status, 413) << r.body << r.error;
  EXPECT_TRUE(absl::StrContains(r.body, "decompressed")) << r.body;
  EXPECT_EQ(r.headers.at("connection"), "close");
  EXPECT_EQ(Get(port(), "/health").status, 200);
}

TEST_F(HttpServerLimitsTest, TheKeyIsCheckedBeforeAnyBodyByte) {
  Serve([](HttpServerOptions& o) { o.api_keys = ApiKeys::Single("k3y"); });
  // The head announces a body that never comes: the answer cannot have waited for it.
  RawConnection c(port());
  ASSERT_TRUE(
      c.Send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\n"
             "Content-Length: 1000000\r\n\r\n"));
  const std::string reply = c.ReadUntil("}", std::chrono::seconds(30));
  EXPECT_EQ(StatusOf(reply), 401) << reply;
  EXPECT_TRUE(absl::StrContains(reply, "authentication_error")) << reply;
  EXPECT_TRUE(c.ClosedWithin(std::chrono::seconds(10)));
  EXPECT_EQ(accounting_.unauthenticated(), 1);
}

TEST_F(HttpServerLimitsTest, AContentLengthOverTheLimitIsRefusedAtOnce) {
  RawConnection c(port());
  ASSERT_TRUE(
      c.Send(absl::StrCat("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: ", kLimit + 1, "\r\n\r\n")));
  const std::string reply = c.ReadUntil("}", std::chrono::seconds(30));
  EXPECT_EQ(StatusOf(reply), 413) << reply;
}

TEST_F(HttpServerLimitsTest, AChunkedBodyOverTheLimitIsRefused) {
  RawConnection c(port());
  ASSERT_TRUE(
      c.Send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
             "c\r\n{\"prompt\": \"\r\n"));
  const std::string chunk = absl::StrCat(absl::Hex(8192), "\r\n", std::string(8192, 'a'), "\r\n");
  // Twice the limit; the server may stop taking them once it has refused the body.
  for (int64_t sent = 0; sent < 2 * kLimit && c.Send(chunk); sent += 8192) {
  }
  const std::string reply = c.ReadUntil("}", std::chrono::seconds(30));
  EXPECT_EQ(StatusOf(reply), 413) << reply;
  RawConnection within(port());
  ASSERT_TRUE(
      within.Send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                  "f\r\n{\"prompt\": \"hi\"\r\n12\r\n, \"max_tokens\": 2}\r\n0\r\n\r\n"));
  const std::string ok = within.ReadUntil("\"usage\"", std::chrono::seconds(30));
  EXPECT_EQ(StatusOf(ok), 200) << ok;
}

TEST_F(HttpServerLimitsTest, LargeHeadsAndTooManyFieldsAre431) {
  RawConnection large(port());
  ASSERT_TRUE(large.Send(absl::StrCat("GET /health HTTP/1.1\r\nX-Big: ", std::string(8000, 'x'), "\r\n\r\n")));
  EXPECT_EQ(StatusOf(large.ReadUntil("}", std::chrono::seconds(30))), 431);
  std::string many = "GET /health HTTP/1.1\r\n";
  for (int i = 0; i < 21; ++i) absl::StrAppend(&many, "X-", i, ": y\r\n");
  RawConnection fields(port());
  ASSERT_TRUE(fields.Send(many + "\r\n"));
  EXPECT_EQ(StatusOf(fields.ReadUntil("}", std::chrono::seconds(30))), 431);
  RawConnection garbage(port());
  ASSERT_TRUE(garbage.Send("NOT HTTP AT ALL\r\n\r\n"));
  EXPECT_EQ(StatusOf(garbage.ReadUntil("}", std::chrono::seconds(30))), 400);
}

TEST_F(HttpServerLimitsTest, ASlowHeadIsClosedAfterTheHeaderTimeoutWhileOthersAreServed) {
  RawConnection slow(port());
  ASSERT_TRUE(slow.Send("GET /hea"));
  EXPECT_EQ(Get(port(), "/health").status, 200);
  // Liveness: the timeout is 0.5 s; 10 s only bounds a hang.
  EXPECT_TRUE(slow.ClosedWithin(std::chrono::seconds(10)));
  EXPECT_EQ(slow.Take(), "");  // closed without an answer
}

TEST_F(HttpServerLimitsTest, AnIdleKeepAliveConnectionIsClosed) {
  RawConnection c(port());
  ASSERT_TRUE(c.Send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_TRUE(absl::EndsWith(c.ReadUntil("ok\n", std::chrono::seconds(30)), "ok\n"));
  EXPECT_TRUE(c.ClosedWithin(std::chrono::seconds(10)));  // idle_timeout 0.5 s; 10 s bounds a hang
}

TEST_F(HttpServerLimitsTest, TokenizingALargePromptDoesNotHoldUpTheIoThread) {
  Serve([](HttpServerOptions& o) {
    o.io_threads = 1;  // the one thread that would stall if the prompt were tokenized on it
    o.max_body_bytes = 8 << 20;
  });
  std::string words;
  while (words.size() < (4 << 20)) words += "the cat watched the gulls ";
  const std::string body = absl::StrCat(R"({"prompt": ")", words, R"(", "max_tokens": 1})");
  RawConnection big(port());
  ASSERT_TRUE(big.Send(absl::StrCat("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: ", body.size(),
                                    "\r\n\r\n", body)));
  // Seconds of tokenizing (the prompt is refused afterwards, longer than max_prompt_tokens): health
  // checks keep being answered meanwhile.
  int answered_meanwhile = 0;
  while (big.ReadUntil("}", std::chrono::milliseconds(20)).empty()) {
    ASSERT_EQ(Get(port(), "/health").status, 200);
    ++answered_meanwhile;
  }
  EXPECT_EQ(StatusOf(big.Take()), 400);
  EXPECT_GE(answered_meanwhile, 5);
}

TEST_F(HttpServerLimitsTest, ExpectContinueIsAnsweredBeforeTheBodyIsSent) {
  RawConnection c(port());
  const std::string json = R"({"prompt": "hi", "max_tokens": 2})";
  ASSERT_TRUE(
      c.Send(absl::StrCat("POST /v1/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                          "Content-Length: ",
                          json.size(), "\r\n\r\n")));
  EXPECT_EQ(c.ReadUntil("\r\n\r\n", std::chrono::seconds(30)), "HTTP/1.1 100 Continue\r\n\r\n");
  ASSERT_TRUE(c.Send(json));
  EXPECT_TRUE(absl::StrContains(c.ReadUntil("\"usage\"", std::chrono::seconds(30)), "HTTP/1.1 200 OK"));
}

}  // namespace
}  // namespace mcserve::server::testing
