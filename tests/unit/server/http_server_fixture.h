// The HTTP server's test fixture: a real Engine on the gated_deltanet fixture model behind an
// HttpServer on 127.0.0.1, with options a test may change, a recording CallerAccounting, and waits
// bounded for liveness only.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/serving/recurrent_runner.h"
#include "gtest/gtest.h"
#include "server/common/caller_accounting.h"
#include "server/http/http_server.h"
#include "tests/unit/server/http_test_client.h"

namespace mcserve::server::testing {

// Every call, in order.
class RecordingAccounting : public CallerAccounting {
 public:
  struct Finished {
    std::string caller;
    engine::FinishReason reason;
    int64_t prompt_tokens, generated_tokens;
  };
  void RequestFinished(absl::string_view caller, engine::FinishReason reason, int64_t prompt_tokens,
                       int64_t generated_tokens) override {
    std::lock_guard<std::mutex> lock(mu_);
    finished_.push_back({std::string(caller), reason, prompt_tokens, generated_tokens});
  }
  void RequestAborted(absl::string_view) override {}
  void Unauthenticated() override {
    std::lock_guard<std::mutex> lock(mu_);
    ++unauthenticated_;
  }
  std::vector<Finished> finished() const {
    std::lock_guard<std::mutex> lock(mu_);
    return finished_;
  }
  int unauthenticated() const {
    std::lock_guard<std::mutex> lock(mu_);
    return unauthenticated_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<Finished> finished_;
  int unauthenticated_ = 0;
};

// Polls `condition` every 10 ms until it holds or `limit` passes (a liveness bound); whether it held.
inline bool Eventually(const std::function<bool()>& condition,
                       std::chrono::milliseconds limit = std::chrono::seconds(30)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

class HttpServerFixture : public ::testing::Test {
 protected:
  void SetUp() override { Serve(); }
  void TearDown() override {
    http_.reset();
    engine_.reset();
  }

  // The engine's options in these tests: long requests allowed (max_tokens up to 60,000).
  static engine::EngineOptions TestEngineOptions() {
    engine::EngineOptions options;
    options.max_tokens_limit = 60000;
    return options;
  }

  // (Re)starts engine and server; `tweak` adjusts the server's options, `engine_options` the engine's.
  void Serve(const std::function<void(HttpServerOptions&)>& tweak = nullptr,
             engine::EngineOptions engine_options = TestEngineOptions()) {
    http_.reset();
    engine_.reset();
    auto model = engine::Model::Load(std::string(MCSERVE_TEST_DATA_DIR) + "/models/gated_deltanet", {.num_threads = 1});
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = std::move(*model);
    auto runner = engine::RecurrentRunner::Create(model_.get(), {.num_slots = 4});
    ASSERT_TRUE(runner.ok());
    auto engine = engine::Engine::Create(std::move(*runner), &model_->tokenizer(), engine_options);
    ASSERT_TRUE(engine.ok());
    engine_ = std::move(*engine);
    HttpServerOptions options;
    options.host = "127.0.0.1";
    options.model_name = "gated_deltanet";
    options.accounting = &accounting_;
    options.metrics = [] { return std::string("# TYPE x counter\nx 1\n"); };
    if (tweak) tweak(options);
    auto http = HttpServer::Start(engine_.get(), &model_->tokenizer(), std::move(options));
    ASSERT_TRUE(http.ok()) << http.status();
    http_ = std::move(*http);
  }
  int port() const { return http_->port(); }
  int64_t cancelled() const { return engine_->Stats().finished_by(engine::FinishReason::kCancelled); }

  RecordingAccounting accounting_;
  std::unique_ptr<engine::Model> model_;
  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<HttpServer> http_;
};

}  // namespace mcserve::server::testing
