// The engine loop's latency reports (LatencyObserver): one first-token report per request that
// generated, one inter-token report per later token, one finish per request (cancelled included),
// and per request TTFT + the ITLs fit inside its end-to-end latency. Never asserts a duration.
#include "engine/serving/latency_observer.h"

#include <algorithm>
#include <mutex>
#include <vector>

#include "gtest/gtest.h"
#include "tests/unit/engine/engine_test_util.h"

namespace mcserve::engine {
namespace {

using namespace testing;  // NOLINT: the engine loop test helpers

// Records every report (the engine loop thread writes, the test thread reads after WaitIdle).
class RecordingObserver final : public LatencyObserver {
 public:
  void OnFirstToken(double seconds) override { Add(first, seconds); }
  void OnInterToken(double seconds) override { Add(inter, seconds); }
  void OnFinished(double seconds, FinishReason reason) override {
    std::lock_guard<std::mutex> lock(mu);
    finished.push_back(seconds);
    reasons.push_back(reason);
  }
  void Add(std::vector<double>& v, double seconds) {
    std::lock_guard<std::mutex> lock(mu);
    v.push_back(seconds);
  }

  std::mutex mu;
  std::vector<double> first, inter, finished;
  std::vector<FinishReason> reasons;
};

TEST(LatencyObserverTest, OneRequestsLatenciesAddUpWithinItsEndToEnd) {
  RecordingObserver obs;
  Fixture f = Make(2, 64, 0, 256, 4096, true, 0, &obs);
  auto h = MustSubmit(*f.engine, Spec(Prompt(9), 6));
  Result r = Collect(*h);
  ASSERT_TRUE(r.status.ok()) << r.status;
  ASSERT_EQ(r.tokens.size(), 6u);
  ASSERT_TRUE(WaitIdle(*f.engine));
  std::lock_guard<std::mutex> lock(obs.mu);
  ASSERT_EQ(obs.first.size(), 1u);
  ASSERT_EQ(obs.inter.size(), 5u);
  ASSERT_EQ(obs.finished.size(), 1u);
  EXPECT_EQ(obs.reasons[0], FinishReason::kLength);
  double sum = obs.first[0];
  for (double s : obs.inter) {
    EXPECT_GE(s, 0.0);
    sum += s;
  }
  EXPECT_GE(obs.first[0], 0.0);
  // The last token is the finishing one: its report and the finish share one clock reading or follow it.
  EXPECT_LE(sum, obs.finished[0] + 1e-9);  // 1e-9: the sum of rounded differences
}

TEST(LatencyObserverTest, CountsPerRequestIncludingCancelledOnes) {
  RecordingObserver obs;
  Fixture f = Make(2, 64, 0, 256, 4096, true, 0, &obs);
  std::vector<std::shared_ptr<RequestHandle>> handles;
  for (int i = 0; i < 5; ++i) handles.push_back(MustSubmit(*f.engine, Spec(Prompt(4 + i, i), 3 + i)));
  auto cancelled = MustSubmit(*f.engine, Spec(Prompt(5, 9), 100000));
  cancelled->Abort();
  int tokens = 0;
  for (auto& h : handles) {
    Result r = Collect(*h);
    ASSERT_TRUE(r.status.ok()) << r.status;
    tokens += static_cast<int>(r.tokens.size());
  }
  Result c = Collect(*cancelled);
  ASSERT_EQ(c.final_event.finish, FinishReason::kCancelled);
  ASSERT_TRUE(WaitIdle(*f.engine));
  std::lock_guard<std::mutex> lock(obs.mu);
  const int cancelled_tokens = static_cast<int>(c.tokens.size());
  EXPECT_EQ(obs.first.size(), 5u + (cancelled_tokens > 0 ? 1u : 0u));
  EXPECT_EQ(obs.first.size() + obs.inter.size(), static_cast<size_t>(tokens + cancelled_tokens));
  ASSERT_EQ(obs.finished.size(), 6u);
  EXPECT_EQ(std::count(obs.reasons.begin(), obs.reasons.end(), FinishReason::kLength), 5);
  EXPECT_EQ(std::count(obs.reasons.begin(), obs.reasons.end(), FinishReason::kCancelled), 1);
}

}  // namespace
}  // namespace mcserve::engine
