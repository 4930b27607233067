// server/metrics: the registry on prometheus-cpp (validation, child cap, rendering through its text
// serializer, concurrency, render hooks) and the mcserve metric set's engine-stats mapping.
#include "server/metrics/metrics.h"

#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/metrics/caller_metrics.h"
#include "server/metrics/mcserve_metrics.h"

namespace mcserve::server {
namespace {

// The registry rejects what Prometheus cannot scrape, before prometheus-cpp sees it.
TEST(MetricsNames, Validation) {
  Registry r;
  absl::Status s = r.AddCounter("bad-name_total", "h").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("bad-name_total"), std::string_view::npos) << s;
  for (const char* bad : {"", "9abc", "a b", "a.b"}) {
    EXPECT_EQ(r.AddGauge(bad, "h").status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_TRUE(r.AddGauge("mcserve:num_requests_running", "h").ok());
  EXPECT_EQ(r.AddGauge("g", "h", {"x-y"}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.AddGauge("g", "h", {"__reserved"}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.AddGauge("g", "h", {"a", "a"}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.AddHistogram("h", "h", {"le"}, {1}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.AddHistogram("h", "h", {}, {2, 1}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.AddHistogram("h", "h", {}, {1, 1}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.AddHistogram("h", "h", {}, {std::nan("")}).status().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(r.AddGauge("g", "h").ok());
  EXPECT_EQ(r.AddCounter("g", "h").status().code(), absl::StatusCode::kAlreadyExists);
  // A failed registration leaves nothing behind.
  EXPECT_EQ(r.Render().find("x-y"), std::string::npos);
  EXPECT_EQ(r.Render().find("# TYPE h "), std::string::npos);
}

// What prometheus-cpp's serializer writes for our families: HELP/TYPE, labels (sorted by name),
// escaped values, cumulative histogram buckets with +Inf, sum and count.
TEST(MetricsRender, SmallRegistry) {
  Registry r;
  auto c = r.AddCounter("demo:requests_total", "Requests handled.", {"model_name", "code"});
  ASSERT_TRUE(c.ok()) << c.status();
  (*(*c)->Get({"m", "200"}))->Increment(3);
  (*(*c)->Get({"m", "500"}))->Increment();
  auto g = r.AddGauge("demo_temperature", "A gauge.");
  ASSERT_TRUE(g.ok());
  (*(*g)->Get({}))->Set(-1.5);
  auto quoted = r.AddGauge("demo_info", "Escaped label.", {"path"});
  (*(*quoted)->Get({"C:\\dir \"x\"\nnext"}))->Set(1);
  auto h = r.AddHistogram("demo_latency_seconds", "Latency.", {"model_name"},
                          {0.125, 0.5, 1, std::numeric_limits<double>::infinity()});
  ASSERT_TRUE(h.ok()) << h.status();
  Histogram* hm = *(*h)->Get({"m"});
  for (double v : {0.0625, 0.125, 0.25, 0.75, 2.0}) hm->Observe(v);  // exact in binary
  const std::string text = r.Render();
  for (const char* line : {
           "# HELP demo:requests_total Requests handled.\n",
           "# TYPE demo:requests_total counter\n",
           "demo:requests_total{code=\"200\",model_name=\"m\"} 3\n",
           "demo:requests_total{code=\"500\",model_name=\"m\"} 1\n",
           "# TYPE demo_temperature gauge\ndemo_temperature -1.5\n",
           "demo_info{path=\"C:\\\\dir \\\"x\\\"\\nnext\"} 1\n",
           "# TYPE demo_latency_seconds histogram\n",
           "demo_latency_seconds_count{model_name=\"m\"} 5\n",
           "demo_latency_seconds_sum{model_name=\"m\"} 3.1875\n",
           "demo_latency_seconds_bucket{model_name=\"m\",le=\"0.125\"} 2\n",
           "demo_latency_seconds_bucket{model_name=\"m\",le=\"0.5\"} 3\n",
           "demo_latency_seconds_bucket{model_name=\"m\",le=\"1\"} 4\n",
           "demo_latency_seconds_bucket{model_name=\"m\",le=\"+Inf\"} 5\n"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  }
  // Counters never decrease.
  (*(*c)->Get({"m", "500"}))->Increment(-5);
  EXPECT_EQ((*(*c)->Get({"m", "500"}))->Value(), 1);
  EXPECT_STREQ(kMetricsContentType, "text/plain; version=0.0.4; charset=utf-8");
}

TEST(MetricsFamily, LabelArityAndUtf8) {
  Registry r;
  Family<Counter>* f = *r.AddCounter("x_total", "x", {"a", "b"});
  EXPECT_EQ(f->Get({"1"}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(f->Get({"1", "2", "3"}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(f->Get({"1", "\xff"}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(f->Get({"1", "\xc3"}).status().code(), absl::StatusCode::kInvalidArgument);          // truncated
  EXPECT_EQ(f->Get({"1", "\xc0\xaf"}).status().code(), absl::StatusCode::kInvalidArgument);      // overlong
  EXPECT_EQ(f->Get({"1", "\xed\xa0\x80"}).status().code(), absl::StatusCode::kInvalidArgument);  // surrogate
  EXPECT_TRUE(f->Get({"1", "h\xc3\xa9"}).ok());                                                  // é
  EXPECT_TRUE(f->Get({"1", "\xf0\x9f\x98\x80"}).ok());                                           // U+1F600
  // The same tuple is the same child.
  EXPECT_EQ(*f->Get({"1", "2"}), *f->Get({"1", "2"}));
}

TEST(MetricsFamily, ChildCap) {
  Registry r(/*max_children_per_family=*/4);
  Family<Gauge>* f = *r.AddGauge("g", "g", {"id"});
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(f->Get({std::to_string(i)}).ok()) << i;
  absl::StatusOr<Gauge*> fifth = f->Get({"4"});
  EXPECT_EQ(fifth.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(fifth.status().message().find("bounded cardinality"), std::string_view::npos) << fifth.status();
  EXPECT_TRUE(f->Get({"2"}).ok());  // existing children still reachable
  EXPECT_EQ(r.Render().find("id=\"4\""), std::string::npos);
  Registry def;
  Family<Counter>* c = *def.AddCounter("c_total", "c", {"id"});
  for (int i = 0; i < kDefaultMaxChildren; ++i) ASSERT_TRUE(c->Get({std::to_string(i)}).ok());
  EXPECT_EQ(c->Get({"request-123"}).status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(MetricsConcurrency, IncrementsSumWhileRendering) {
  Registry r;
  Counter* c = *(*r.AddCounter("c_total", "c"))->Get({});
  Counter* mirrored = *(*r.AddCounter("m_total", "m"))->Get({});
  Gauge* g = *(*r.AddGauge("g", "g"))->Get({});
  Family<Histogram>* hf = *r.AddHistogram("h", "h", {"k"}, {0.5});
  constexpr int kThreads = 4, kIters = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Histogram* h = *hf->Get({t % 2 == 0 ? "even" : "odd"});
      for (int i = 0; i < kIters; ++i) {
        c->Increment();
        g->Increment(2);
        g->Decrement();
        h->Observe(i % 2 == 0 ? 0.25 : 1.0);
        AdvanceTo(*mirrored, i);  // concurrent mirrors of one total never overshoot it
        if (i % 1000 == 0) (void)r.Render();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(c->Value(), kThreads * kIters);
  EXPECT_EQ(g->Value(), kThreads * kIters);
  EXPECT_EQ(mirrored->Value(), kIters - 1);
  const std::string text = r.Render();
  for (const char* k : {"even", "odd"}) {
    const std::string count = absl::StrCat("h_count{k=\"", k, "\"} ", 2 * kIters, "\n");
    const std::string low = absl::StrCat("h_bucket{k=\"", k, "\",le=\"0.5\"} ", kIters, "\n");
    EXPECT_NE(text.find(count), std::string::npos) << count << text;
    EXPECT_NE(text.find(low), std::string::npos) << low << text;
  }
}

TEST(MetricsRegistry, RenderHooksRunOnEveryRenderAndCountersOnlyAdvance) {
  Registry r;
  Counter* c = *(*r.AddCounter("c_total", "c"))->Get({});
  int hook_runs = 0;
  r.AddRenderHook([&] { AdvanceTo(*c, ++hook_runs * 10); });
  (void)r.Render();
  const std::string second = r.Render();
  EXPECT_NE(second.find("\nc_total 20\n"), std::string::npos) << second;
  AdvanceTo(*c, 5);  // lower: ignored
  EXPECT_EQ(c->Value(), 20);
}

TEST(McserveMetrics, UpdateFromEngineStats) {
  Registry r;
  auto m = McserveMetrics::Create(r, "mcserve-tiny");
  ASSERT_TRUE(m.ok()) << m.status();
  engine::EngineStats s;
  s.slots_total = 8;
  s.slots_used = 2;
  s.running = 2;
  s.waiting = 5;
  s.tokens_generated = 100;
  s.prompt_tokens_processed = 40;
  s.prompt_tokens_cached = 24;
  s.runner.device_pages = 11;
  s.runner.host_pages = 3;
  s.runner.stagings = 4;
  s.runner.prefix_hits = 6;
  s.runner.prefix_misses = 9;
  s.runner.evictions = 2;
  s.runner.prefix_cache_entries = 12;
  s.runner.prefix_cache_bytes = 345678;
  s.runner.prefix_cache_budget_bytes = 1 << 30;
  s.write_timeouts = 3;
  s.finished[static_cast<int>(engine::FinishReason::kStop)] = 7;
  s.finished[static_cast<int>(engine::FinishReason::kLength)] = 1;
  s.finished[static_cast<int>(engine::FinishReason::kCancelled)] = 2;
  s.finished[static_cast<int>(engine::FinishReason::kError)] = 3;
  McserveMetrics& mm = **m;
  mm.UpdateFromEngineStats(s);
  EXPECT_EQ(mm.num_requests_running.Value(), 2);
  EXPECT_EQ(mm.num_requests_waiting.Value(), 5);
  EXPECT_DOUBLE_EQ(mm.state_slot_usage_perc.Value(), 0.25);
  EXPECT_EQ(mm.max_running_requests.Value(), 8);
  EXPECT_EQ(mm.checkpoint_pages_device.Value(), 11);
  EXPECT_EQ(mm.checkpoint_pages_host.Value(), 3);
  EXPECT_EQ(mm.prompt_tokens.Value(), 64);
  EXPECT_EQ(mm.generation_tokens.Value(), 100);
  EXPECT_EQ(mm.request_success(engine::FinishReason::kStop).Value(), 7);
  EXPECT_EQ(mm.request_success(engine::FinishReason::kLength).Value(), 1);
  EXPECT_EQ(mm.request_success(engine::FinishReason::kCancelled).Value(), 2);
  EXPECT_EQ(mm.request_success(engine::FinishReason::kError).Value(), 3);
  EXPECT_EQ(mm.checkpoint_stagings.Value(), 4);
  EXPECT_EQ(mm.prefix_cache_hits.Value(), 6);
  EXPECT_EQ(mm.prefix_cache_misses.Value(), 9);
  EXPECT_EQ(mm.prefix_cache_evictions.Value(), 2);
  EXPECT_EQ(mm.prefix_cache_entries.Value(), 12);
  EXPECT_EQ(mm.prefix_cache_bytes.Value(), 345678);
  EXPECT_EQ(mm.prefix_cache_budget_bytes.Value(), 1 << 30);
  EXPECT_EQ(mm.request_write_timeouts.Value(), 3);

  // An older snapshot never lowers a counter; gauges follow it.
  engine::EngineStats older = s;
  older.tokens_generated = 50;
  older.runner.prefix_hits = 1;
  older.waiting = 0;
  older.slots_total = 0;
  mm.UpdateFromEngineStats(older);
  EXPECT_EQ(mm.generation_tokens.Value(), 100);
  EXPECT_EQ(mm.prefix_cache_hits.Value(), 6);
  EXPECT_EQ(mm.num_requests_waiting.Value(), 0);
  EXPECT_EQ(mm.state_slot_usage_perc.Value(), 0);

  const std::string text = r.Render();
  EXPECT_NE(text.find("mcserve:checkpoint_pages{model_name=\"mcserve-tiny\",tier=\"device\"} 11\n"),
            std::string::npos) << text;
  EXPECT_NE(text.find("mcserve:request_success_total{finished_reason=\"stop\",model_name=\"mcserve-tiny\"} 7\n"),
            std::string::npos) << text;
  EXPECT_NE(text.find("mcserve:time_to_first_token_seconds_bucket{model_name=\"mcserve-tiny\",le=\"2560\"} 0\n"),
            std::string::npos) << text;
  EXPECT_NE(text.find("mcserve:e2e_request_latency_seconds_bucket{model_name=\"mcserve-tiny\",le=\"7680\"} 0\n"),
            std::string::npos) << text;
  // Registering the set twice in one registry is an error, not a crash.
  EXPECT_EQ(McserveMetrics::Create(r, "other").status().code(), absl::StatusCode::kAlreadyExists);
}

// Per-caller counters: every configured key name has its series from the first scrape; a finished
// request counts under its caller and reason only.
TEST(CallerMetrics, CountsPerKeyName) {
  Registry r;
  auto m = CallerMetrics::Create(r, "tiny", {"alice", "bob"});
  ASSERT_TRUE(m.ok()) << m.status();
  std::string text = r.Render();
  EXPECT_NE(text.find("mcserve:caller_requests_total{api_key_name=\"bob\",finished_reason=\"length\",model_name=\"tiny\"} 0\n"),
            std::string::npos) << text;
  EXPECT_NE(text.find("mcserve:caller_aborts_total{api_key_name=\"alice\",model_name=\"tiny\"} 0\n"), std::string::npos);
  (*m)->RequestFinished("alice", engine::FinishReason::kLength, 7, 16);
  (*m)->RequestFinished("alice", engine::FinishReason::kCancelled, 3, 1);
  (*m)->RequestAborted("alice");
  (*m)->Unauthenticated();
  (*m)->Unauthenticated();
  text = r.Render();
  for (const char* line :
       {"mcserve:caller_requests_total{api_key_name=\"alice\",finished_reason=\"length\",model_name=\"tiny\"} 1\n",
        "mcserve:caller_requests_total{api_key_name=\"alice\",finished_reason=\"cancelled\",model_name=\"tiny\"} 1\n",
        "mcserve:caller_requests_total{api_key_name=\"bob\",finished_reason=\"length\",model_name=\"tiny\"} 0\n",
        "mcserve:caller_prompt_tokens_total{api_key_name=\"alice\",model_name=\"tiny\"} 10\n",
        "mcserve:caller_generation_tokens_total{api_key_name=\"alice\",model_name=\"tiny\"} 17\n",
        "mcserve:caller_generation_tokens_total{api_key_name=\"bob\",model_name=\"tiny\"} 0\n",
        "mcserve:caller_aborts_total{api_key_name=\"alice\",model_name=\"tiny\"} 1\n",
        "mcserve:unauthenticated_requests_total{model_name=\"tiny\"} 2\n"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << text;
  }
  // Without keys every caller is "".
  Registry anonymous;
  auto a = CallerMetrics::Create(anonymous, "tiny", {});
  ASSERT_TRUE(a.ok()) << a.status();
  (*a)->RequestFinished("", engine::FinishReason::kStop, 1, 2);
  EXPECT_NE(anonymous.Render().find("mcserve:caller_requests_total{api_key_name=\"\",finished_reason=\"stop\",model_name=\"tiny\"} 1\n"),
            std::string::npos);
}

TEST(McserveMetrics, LatencyObserverFillsTheHistograms) {
  Registry r;
  auto m = McserveMetrics::Create(r, "tiny");
  ASSERT_TRUE(m.ok()) << m.status();
  MetricsLatencyObserver obs(**m);
  engine::LatencyObserver& as_engine_sees_it = obs;
  as_engine_sees_it.OnFirstToken(0.03);
  as_engine_sees_it.OnInterToken(0.004);
  as_engine_sees_it.OnInterToken(0.02);
  as_engine_sees_it.OnFinished(0.5, engine::FinishReason::kStop);
  const std::string text = r.Render();
  for (const char* line : {
           "mcserve:time_to_first_token_seconds_bucket{model_name=\"tiny\",le=\"0.02\"} 0\n",
           "mcserve:time_to_first_token_seconds_bucket{model_name=\"tiny\",le=\"0.04\"} 1\n",
           "mcserve:time_to_first_token_seconds_count{model_name=\"tiny\"} 1\n",
           "mcserve:inter_token_latency_seconds_bucket{model_name=\"tiny\",le=\"0.01\"} 1\n",
           "mcserve:inter_token_latency_seconds_bucket{model_name=\"tiny\",le=\"0.025\"} 2\n",
           "mcserve:inter_token_latency_seconds_count{model_name=\"tiny\"} 2\n",
           "mcserve:e2e_request_latency_seconds_bucket{model_name=\"tiny\",le=\"0.3\"} 0\n",
           "mcserve:e2e_request_latency_seconds_bucket{model_name=\"tiny\",le=\"0.5\"} 1\n",
           "mcserve:e2e_request_latency_seconds_count{model_name=\"tiny\"} 1\n"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  }
}

TEST(McserveMetrics, VllmBucketSets) {
  EXPECT_EQ(TimeToFirstTokenBuckets().size(), 22u);
  EXPECT_EQ(TimeToFirstTokenBuckets().front(), 0.001);
  EXPECT_EQ(TimeToFirstTokenBuckets().back(), 2560.0);
  EXPECT_EQ(InterTokenLatencyBuckets().size(), 19u);
  EXPECT_EQ(InterTokenLatencyBuckets().back(), 80.0);
  EXPECT_EQ(E2eRequestLatencyBuckets().size(), 21u);
  EXPECT_EQ(E2eRequestLatencyBuckets().front(), 0.3);
  EXPECT_EQ(E2eRequestLatencyBuckets().back(), 7680.0);
}

}  // namespace
}  // namespace mcserve::server
