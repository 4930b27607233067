// The HTTP port against a real Engine on a fixture model, over loopback with cpp-httplib's client:
// health, readiness, models, metrics, OpenAI completions (JSON and server-sent events) equal to the
// engine's own output, errors naming the parameter, the API key, and a streaming client that
// disconnects freeing its slot.
#include "server/http/http_server.h"

#include <httplib.h>

#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "engine/serving/recurrent_runner.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace mcserve::server {
namespace {

using Json = nlohmann::json;

std::string FixtureDir() { return std::string(MCSERVE_TEST_DATA_DIR) + "/models/gated_deltanet"; }

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override { Serve(""); }
  void Serve(const std::string& api_key) {
    http_.reset();
    engine_.reset();
    auto model = engine::Model::Load(FixtureDir(), {.num_threads = 1});
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = std::move(*model);
    auto runner = engine::RecurrentRunner::Create(model_.get(), {.num_slots = 4});
    ASSERT_TRUE(runner.ok());
    auto engine = engine::Engine::Create(std::move(*runner), &model_->tokenizer(), {});
    ASSERT_TRUE(engine.ok());
    engine_ = std::move(*engine);
    auto http = HttpServer::Start(engine_.get(), &model_->tokenizer(),
                                  {.host = "127.0.0.1",
                                   .model_name = "gated_deltanet",
                                   .api_key = api_key,
                                   .limits = {.max_tokens_limit = 60000},
                                   .metrics = [] { return std::string("# TYPE x counter\nx 1\n"); }});
    ASSERT_TRUE(http.ok()) << http.status();
    http_ = std::move(*http);
    client_ = std::make_unique<httplib::Client>("127.0.0.1", http_->port());
    client_->set_read_timeout(60, 0);
  }
  void TearDown() override {
    client_.reset();
    http_.reset();
    engine_.reset();
  }
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

  std::unique_ptr<engine::Model> model_;
  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(HttpServerTest, HealthReadyModelsMetrics) {
  auto health = client_->Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  auto ready = client_->Get("/ready");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200);
  auto models = client_->Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(Json::parse(models->body)["data"][0]["id"], "gated_deltanet");
  auto metrics = client_->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->body, "# TYPE x counter\nx 1\n");
  EXPECT_TRUE(absl::StartsWith(metrics->get_header_value("Content-Type"), "text/plain; version=0.0.4"));
}

TEST_F(HttpServerTest, CompletionEqualsTheEnginesOutput) {
  const std::vector<int32_t> expected = EngineTokens("The cat watched", 12);
  auto res = client_->Post(
      "/v1/completions",
      R"({"model": "gated_deltanet", "prompt": "The cat watched", "max_tokens": 12, "temperature": 0, "ignore_eos": true, "logprobs": 2})",
      "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const Json body = Json::parse(res->body);
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
  auto res = client_->Post("/v1/completions",
                           R"({"prompt": "The cat watched", "max_tokens": 10, "temperature": 0, "ignore_eos": true, "stream": true})",
                           "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  EXPECT_TRUE(absl::StartsWith(res->get_header_value("Content-Type"), "text/event-stream"));
  std::string text;
  std::vector<std::string> events = absl::StrSplit(res->body, "\n\n", absl::SkipEmpty());
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

TEST_F(HttpServerTest, BadRequestsAreNamedAndLeaveTheServerHealthy) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"prompt": ""})", "prompt"},
      {R"({"max_tokens": 4})", "prompt"},
      {R"({"prompt": "hi", "temperature": -1})", "temperature"},
      {R"({"prompt": "hi", "top_p": 1.5})", "top_p"},
      {R"({"prompt": "hi", "max_tokens": 100000})", "max_tokens"},
      {R"({"prompt": "hi", "max_tokens": 0})", "max_tokens"},
      {R"({"prompt": "hi", "n": 2})", "n"},
      {R"({"prompt": ["a", "b"]})", "prompt"},
      {R"({"prompt": "hi", "logit_bias": {"x": 1}})", "logit_bias"},
      {"{not json", "JSON"},
  };
  for (const auto& [body, field] : cases) {
    auto res = client_->Post("/v1/completions", body, "application/json");
    ASSERT_TRUE(res) << body;
    EXPECT_EQ(res->status, 400) << body << " → " << res->body;
    EXPECT_TRUE(absl::StrContains(res->body, field)) << body << " → " << res->body;
  }
  auto wrong_model = client_->Post("/v1/completions", R"({"prompt": "hi", "model": "gpt-4"})", "application/json");
  ASSERT_TRUE(wrong_model);
  EXPECT_EQ(wrong_model->status, 404);
  auto ok = client_->Post("/v1/completions", R"({"prompt": "hi", "max_tokens": 2})", "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
}

TEST_F(HttpServerTest, ApiKeyIsRequiredExceptForHealth) {
  Serve("s3cret");
  auto missing = client_->Post("/v1/completions", R"({"prompt": "hi"})", "application/json");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 401);
  EXPECT_EQ(client_->Get("/v1/models")->status, 401);
  EXPECT_EQ(client_->Get("/metrics")->status, 401);
  EXPECT_EQ(client_->Get("/health")->status, 200);
  EXPECT_EQ(client_->Get("/ready")->status, 200);
  client_->set_bearer_token_auth("wrong");
  EXPECT_EQ(client_->Get("/v1/models")->status, 401);
  client_->set_bearer_token_auth("s3cret");
  EXPECT_EQ(client_->Get("/v1/models")->status, 200);
  auto ok = client_->Post("/v1/completions", R"({"prompt": "hi", "max_tokens": 2})", "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
}

TEST_F(HttpServerTest, AStreamingClientThatDisconnectsFreesItsSlot) {
  // A request that would run for a long time; the client reads two chunks and hangs up.
  int received = 0;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = R"({"prompt": "The cat", "max_tokens": 60000, "ignore_eos": true, "stream": true})";
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++received < 2; };
  httplib::Client quitter("127.0.0.1", http_->port());
  quitter.send(req);
  EXPECT_EQ(received, 2);
  for (int i = 0; i < 400 && engine_->Stats().finished_by(engine::FinishReason::kCancelled) == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  const engine::EngineStats stats = engine_->Stats();
  EXPECT_EQ(stats.finished_by(engine::FinishReason::kCancelled), 1);
  EXPECT_EQ(stats.slots_used, 0);
  EXPECT_LT(stats.tokens_generated, 60000);
}

}  // namespace
}  // namespace mcserve::server
