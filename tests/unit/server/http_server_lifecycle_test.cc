// The HTTP server's life around its completions, over loopback: active_requests counts them;
// StopAdmitting refuses new ones (503, connection closed) and /ready while running ones finish;
// Stop closes idle, slow and non-reading clients and cancels their work promptly; a client that stops
// reading is cancelled by the engine's write timeout and its connection closed.
#include <future>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/unit/server/http_server_fixture.h"

namespace mcserve::server::testing {
namespace {

// A POST /v1/completions request's bytes.
std::string CompletionRequest(const std::string& json) {
  return absl::StrCat("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: ", json.size(), "\r\n\r\n", json);
}

constexpr char kLongStream[] = R"({"prompt": "The cat", "max_tokens": 60000, "ignore_eos": true, "stream": true})";
constexpr char kLongPlain[] = R"({"prompt": "The cat", "max_tokens": 60000, "ignore_eos": true})";

class HttpServerLifecycleTest : public HttpServerFixture {};

TEST_F(HttpServerLifecycleTest, ActiveRequestsCountsStreamedAndPlainCompletions) {
  EXPECT_EQ(http_->active_requests(), 0);
  RawConnection streamed(port()), plain(port());
  ASSERT_TRUE(streamed.Send(CompletionRequest(kLongStream)));
  ASSERT_TRUE(plain.Send(CompletionRequest(kLongPlain)));
  ASSERT_TRUE(Eventually([&] { return http_->active_requests() == 2; }));
  streamed.Close();
  plain.Close();
  ASSERT_TRUE(Eventually([&] { return http_->active_requests() == 0; }));
  EXPECT_TRUE(Eventually([&] { return cancelled() == 2; }));
}

TEST_F(HttpServerLifecycleTest, StopAdmittingRefusesNewCompletionsWhileRunningOnesFinish) {
  // Not read until the end: its small receive buffer fills and keeps it running (backpressure)
  // however fast the model is.
  RawConnection running(port(), /*receive_buffer=*/2048);
  ASSERT_TRUE(running.Send(
      CompletionRequest(R"({"prompt": "The cat", "max_tokens": 4000, "ignore_eos": true, "stream": true})")));
  ASSERT_TRUE(Eventually([&] { return http_->active_requests() == 1; }));
  http_->StopAdmitting();
  const HttpReply refused = Post(port(), "/v1/completions", R"({"prompt": "hi", "max_tokens": 2})");
  EXPECT_EQ(refused.status, 503);
  EXPECT_TRUE(absl::StrContains(refused.body, "server_error")) << refused.body;
  EXPECT_EQ(refused.headers.at("connection"), "close");
  EXPECT_EQ(Get(port(), "/ready").status, 503);
  EXPECT_EQ(Get(port(), "/health").status, 200);
  const std::string stream = running.ReadUntil("data: [DONE]", std::chrono::seconds(60));
  EXPECT_TRUE(absl::StrContains(stream, "\"finish_reason\":\"length\"")) << stream.substr(0, 300);
  EXPECT_TRUE(absl::StrContains(stream, "data: [DONE]"));
  EXPECT_TRUE(Eventually([&] { return http_->active_requests() == 0; }));
  EXPECT_EQ(cancelled(), 0);
}

TEST_F(HttpServerLifecycleTest, StopClosesIdleSlowAndNonReadingClientsPromptly) {
  RawConnection idle(port()), slow(port()), stuck(port(), /*receive_buffer=*/2048);
  ASSERT_TRUE(slow.Send("GET /hea"));                       // a head that never completes
  ASSERT_TRUE(stuck.Send(CompletionRequest(kLongStream)));  // and never reads its stream
  ASSERT_TRUE(Eventually([&] { return http_->active_requests() == 1; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // let the stuck client's buffers fill
  std::future<void> stopped = std::async(std::launch::async, [&] { http_->Stop(); });
  // Liveness only: Stop waits for no client; 20 s is far beyond what closing sockets takes.
  ASSERT_EQ(stopped.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  EXPECT_EQ(http_->active_requests(), 0);
  EXPECT_TRUE(idle.ClosedWithin(std::chrono::seconds(10)));
  EXPECT_TRUE(slow.ClosedWithin(std::chrono::seconds(10)));
  EXPECT_TRUE(Eventually([&] { return cancelled() == 1 && engine_->Stats().slots_used == 0; }));
  EXPECT_TRUE(stuck.ClosedWithin(std::chrono::seconds(10)));
  EXPECT_FALSE(RawConnection(port()).connected());  // no longer listening
  http_->Stop();                                    // idempotent
}

TEST_F(HttpServerLifecycleTest, AClientThatStopsReadingIsCancelledAndDisconnected) {
  engine::EngineOptions engine_options = TestEngineOptions();
  engine_options.write_timeout = absl::Milliseconds(200);
  Serve([](HttpServerOptions& o) { o.write_timeout = absl::Seconds(2); }, engine_options);
  RawConnection stuck(port(), /*receive_buffer=*/2048);
  ASSERT_TRUE(stuck.Send(CompletionRequest(kLongStream)));
  ASSERT_TRUE(Eventually([&] { return engine_->Stats().write_timeouts == 1; }));
  EXPECT_EQ(engine_->Stats().slots_used, 0);
  EXPECT_LT(engine_->Stats().tokens_generated, 60000);
  EXPECT_TRUE(Eventually([&] { return http_->active_requests() == 0; }));
  EXPECT_TRUE(stuck.ClosedWithin(std::chrono::seconds(30)));
  ASSERT_EQ(accounting_.finished().size(), 1u);
  EXPECT_EQ(accounting_.finished()[0].reason, engine::FinishReason::kCancelled);
}

}  // namespace
}  // namespace mcserve::server::testing
