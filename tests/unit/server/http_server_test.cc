// The HTTP port against a real Engine on a fixture model, over loopback: health, readiness, models,
// metrics, OpenAI completions (JSON and server-sent events) equal to the engine's own output, errors
// naming the parameter, API keys with per-caller accounting, and clients that disconnect (streamed or
// not) cancelling their request.
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "tests/unit/server/http_server_fixture.h"

namespace mcserve::server::testing {
namespace {

using Json = nlohmann::json;

class HttpServerTest : public HttpServerFixture {
 protected:
  // The engine's own greedy tokens for `prompt` text.
  std::vector<int32_t> EngineTokens(const std::string& prompt, int max_tokens) {
    engine::RequestSpec spec;
    spec.prompt = *model_->tokenizer().Encode(prompt, true);
    spec.sampling.temperature = 0;
    spec.stop.max_tokens = max_tokens;
    spec.stop.ignore_eos = true;
    auto handle = engine_->Submit(spec);
    std::vector<int32_t> ids;
    while (true) {
      auto e = (*handle)->Next(absl::Seconds(60));
      if (!e.ok()) break;
      if (e->token_id >= 0) ids.push_back(e->token_id);
      if (e->is_final()) break;
    }
    return ids;
  }
};

TEST_F(HttpServerTest, HealthReadyModelsMetrics) {
  EXPECT_EQ(Get(port(), "/health").status, 200);
  EXPECT_EQ(Get(port(), "/ready").status, 200);
  const HttpReply models = Get(port(), "/v1/models");
  ASSERT_EQ(models.status, 200) << models.error;
  EXPECT_EQ(Json::parse(models.body)["data"][0]["id"], "gated_deltanet");
  const HttpReply metrics = Get(port(), "/metrics");
  EXPECT_EQ(metrics.body, "# TYPE x counter\nx 1\n");
  EXPECT_TRUE(absl::StartsWith(metrics.headers.at("content-type"), "text/plain; version=0.0.4"));
  EXPECT_EQ(Get(port(), "/nowhere").status, 404);
  RawConnection head(port());
  ASSERT_TRUE(head.Send("HEAD /health HTTP/1.1\r\nHost: x\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
  const std::string both = head.ReadUntil("\r\n\r\nok\n", std::chrono::seconds(30));
  EXPECT_EQ(std::vector<std::string>(absl::StrSplit(both, "HTTP/1.1 200 OK")).size(), 3u) << both;  // two answers
  EXPECT_TRUE(absl::StrContains(both, "Content-Length: 3\r\n\r\nHTTP/1.1 200 OK")) << both;  // the first bodiless
  EXPECT_EQ(Post(port(), "/health", "").status, 405);
}

TEST_F(HttpServerTest, CompletionEqualsTheEnginesOutput) {
  const std::vector<int32_t> expected = EngineTokens("The cat watched", 12);
  const HttpReply res = Post(
      port(), "/v1/completions",
      R"({"model": "gated_deltanet", "prompt": "The cat watched", "max_tokens": 12, "temperature": 0, "ignore_eos": true, "logprobs": 2})");
  ASSERT_EQ(res.status, 200) << res.body << res.error;
  const Json body = Json::parse(res.body);
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["choices"][0]["text"], *model_->tokenizer().Decode(expected));
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(body["usage"]["completion_tokens"], 12);
  EXPECT_EQ(body["choices"][0]["logprobs"]["token_logprobs"].size(), 12u);
  // OpenAI keys alternatives by their text: two ids with the same text share one entry.
  const Json& top = body["choices"][0]["logprobs"]["top_logprobs"][0];
  EXPECT_TRUE(top.size() == 1u || top.size() == 2u) << top;
  for (const Json& lp : body["choices"][0]["logprobs"]["token_logprobs"]) EXPECT_LE(lp.get<double>(), 0.0);
}

TEST_F(HttpServerTest, StreamingSendsServerSentEventsEndingWithDone) {
  const std::vector<int32_t> expected = EngineTokens("The cat watched", 10);
  const HttpReply res =
      Post(port(), "/v1/completions",
           R"({"prompt": "The cat watched", "max_tokens": 10, "temperature": 0, "ignore_eos": true, "stream": true})");
  ASSERT_EQ(res.status, 200) << res.error;
  EXPECT_TRUE(absl::StartsWith(res.headers.at("content-type"), "text/event-stream"));
  std::string text;
  std::vector<std::string> events = absl::StrSplit(res.body, "\n\n", absl::SkipEmpty());
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events.back(), "data: [DONE]");
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    ASSERT_TRUE(absl::StartsWith(events[i], "data: ")) << events[i];
    const Json chunk = Json::parse(events[i].substr(6));
    text += chunk["choices"][0]["text"].get<std::string>();
    if (i + 2 == events.size()) {
      EXPECT_EQ(chunk["choices"][0]["finish_reason"], "length");
      EXPECT_EQ(chunk["usage"]["completion_tokens"], 10);
    }
  }
  EXPECT_EQ(text, *model_->tokenizer().Decode(expected));
}

TEST_F(HttpServerTest, KeepAliveServesSeveralRequestsOnOneConnection) {
  RawConnection c(port());
  ASSERT_TRUE(c.connected());
  const std::string body = R"({"prompt": "hi", "max_tokens": 2})";
  const std::string request =
      absl::StrCat("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: ", body.size(), "\r\n\r\n", body);
  ASSERT_TRUE(c.Send(request + "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));  // pipelined
  const std::string both = c.ReadUntil("\r\n\r\nok\n", std::chrono::seconds(30));
  EXPECT_TRUE(absl::StrContains(both, "text_completion")) << both;
  EXPECT_TRUE(absl::EndsWith(both, "\r\n\r\nok\n")) << both;
  c.Take();
  ASSERT_TRUE(c.Send(request));
  const std::string third = c.ReadUntil("\"usage\"", std::chrono::seconds(30));
  EXPECT_TRUE(absl::StartsWith(third, "HTTP/1.1 200")) << third;
}

TEST_F(HttpServerTest, AnHttp10StreamEndsByClosingTheConnection) {
  RawConnection c(port());
  const std::string body = R"({"prompt": "The cat", "max_tokens": 5, "ignore_eos": true, "stream": true})";
  ASSERT_TRUE(c.Send(absl::StrCat("POST /v1/completions HTTP/1.0\r\nContent-Length: ", body.size(), "\r\n\r\n", body)));
  ASSERT_TRUE(c.ClosedWithin(std::chrono::seconds(30)));
  const std::string reply = c.Take();
  EXPECT_TRUE(absl::StartsWith(reply, "HTTP/1.0 200 OK\r\n")) << reply;
  EXPECT_FALSE(absl::StrContains(reply, "chunked")) << reply;
  EXPECT_TRUE(absl::StrContains(reply, "\r\n\r\ndata: {")) << reply;
  EXPECT_TRUE(absl::EndsWith(reply, "\n\ndata: [DONE]\n\n")) << reply;
}

TEST_F(HttpServerTest, BadRequestsAreNamedAndLeaveTheServerHealthy) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"prompt": ""})", "prompt"},
      {R"({"max_tokens": 4})", "prompt"},
      {R"({"prompt": "hi", "temperature": -1})", "temperature"},
      {R"({"prompt": "hi", "top_p": 1.5})", "top_p"},
      {R"({"prompt": "hi", "max_tokens": 100000})", "max_tokens"},
      {R"({"prompt": "hi", "max_tokens": 0})", "max_tokens"},
      {R"({"prompt": "hi", "max_tokens": 1e12})", "max_tokens: 1e+12 is outside [1, 60000]"},
      {R"({"prompt": "hi", "stop_token_ids": [4294967298]})", "stop_token_ids: 4294967298 is not a token id"},
      {R"({"prompt": "hi", "n": 0})", "n: 0 is outside [1, 16]"},
      {R"({"prompt": "hi", "n": 1000000})", "n: 1000000 is outside [1, 16]"},
      {R"({"prompt": "hi", "echo": "yes"})", "echo: must be true or false"},
      {R"({"prompt": "hi", "echo": true, "logprobs": 2})", "echo: with logprobs is not supported"},
      {R"({"prompt": "hi", "stream_options": {"include_usage": true}})", "stream_options: is only allowed with"},
      {R"({"prompt": "hi", "stream": true, "stream_options": {"include_usage": 1}})", "stream_options.include_usage"},
      {R"({"prompt": "hi", "stream": true, "stream_options": []})", "stream_options: must be an object"},
      {R"({"prompt": "hi", "stream": true, "stream_options": {"x": true}})", "stream_options.x: is not supported"},
      {R"({"prompt": ["a", "b"]})", "prompt"},
      {R"({"prompt": "hi", "logit_bias": {"x": 1}})", "logit_bias"},
      {"{not json", "JSON"},
  };
  for (const auto& [body, field] : cases) {
    const HttpReply res = Post(port(), "/v1/completions", body);
    EXPECT_EQ(res.status, 400) << body << " → " << res.body;
    EXPECT_TRUE(absl::StrContains(res.body, field)) << body << " → " << res.body;
  }
  EXPECT_EQ(Post(port(), "/v1/completions", R"({"prompt": "hi", "model": "gpt-4"})").status, 404);
  EXPECT_EQ(Post(port(), "/v1/completions", R"({"prompt": "hi", "max_tokens": 2})").status, 200);
}

TEST_F(HttpServerTest, ApiKeysAreRequiredExceptForHealthAndCallersAreAccounted) {
  Serve([](HttpServerOptions& o) { o.api_keys = *ApiKeys::Parse("alice s3cret\nbob b0b-key\n", "test keys"); });
  EXPECT_EQ(Post(port(), "/v1/completions", R"({"prompt": "hi"})").status, 401);
  EXPECT_EQ(Get(port(), "/v1/models").status, 401);
  EXPECT_EQ(Get(port(), "/metrics").status, 401);
  EXPECT_EQ(Get(port(), "/v1/models", {{"Authorization", "Bearer wrong"}}).status, 401);
  EXPECT_EQ(accounting_.unauthenticated(), 4);
  EXPECT_EQ(Get(port(), "/health").status, 200);
  EXPECT_EQ(Get(port(), "/ready").status, 200);
  EXPECT_EQ(Get(port(), "/v1/models", {{"Authorization", "Bearer s3cret"}}).status, 200);
  EXPECT_EQ(Post(port(), "/v1/completions", R"({"prompt": "hi", "max_tokens": 2, "ignore_eos": true})",
                 {{"Authorization", "Bearer b0b-key"}})
                .status,
            200);
  EXPECT_EQ(accounting_.unauthenticated(), 4);
  const auto finished = accounting_.finished();
  ASSERT_EQ(finished.size(), 1u);
  EXPECT_EQ(finished[0].caller, "bob");
  EXPECT_EQ(finished[0].reason, engine::FinishReason::kLength);
  EXPECT_EQ(finished[0].generated_tokens, 2);
  EXPECT_GT(finished[0].prompt_tokens, 0);
}

TEST_F(HttpServerTest, AStreamingClientThatDisconnectsFreesItsSlot) {
  RawConnection quitter(port());
  const std::string body = R"({"prompt": "The cat", "max_tokens": 60000, "ignore_eos": true, "stream": true})";
  ASSERT_TRUE(quitter.Send(
      absl::StrCat("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: ", body.size(), "\r\n\r\n", body)));
  const std::string got = quitter.ReadUntil("\n\ndata: ", std::chrono::seconds(30));
  ASSERT_TRUE(absl::StrContains(got, "\n\ndata: ")) << got;  // two events arrived
  quitter.Close();
  ASSERT_TRUE(Eventually([&] { return cancelled() == 1 && http_->active_requests() == 0; }));
  const engine::EngineStats stats = engine_->Stats();
  EXPECT_EQ(stats.slots_used, 0);
  EXPECT_LT(stats.tokens_generated, 60000);
  ASSERT_EQ(accounting_.finished().size(), 1u);
  EXPECT_EQ(accounting_.finished()[0].reason, engine::FinishReason::kCancelled);
}

TEST_F(HttpServerTest, ANonStreamedClientThatDisconnectsIsCancelled) {
  RawConnection quitter(port());
  const std::string body = R"({"prompt": "The cat", "max_tokens": 60000, "ignore_eos": true})";
  ASSERT_TRUE(quitter.Send(
      absl::StrCat("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: ", body.size(), "\r\n\r\n", body)));
  ASSERT_TRUE(Eventually([&] { return engine_->Stats().tokens_generated > 0; }));
  EXPECT_EQ(http_->active_requests(), 1);
  quitter.Close();
  ASSERT_TRUE(Eventually([&] { return cancelled() == 1 && http_->active_requests() == 0; }));
  EXPECT_EQ(engine_->Stats().slots_used, 0);
  EXPECT_LT(engine_->Stats().tokens_generated, 60000);
}

}  // namespace
}  // namespace mcserve::server::testing
