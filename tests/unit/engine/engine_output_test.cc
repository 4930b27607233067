// Engine tests on the output side, against the deterministic fake ModelRunner (fake_model_runner.h)
// and the real test tokenizer: backpressure from a full channel, a row that is not finite, when output
// listeners run, the write timeout. Assertions are on what happened, never on timing; timeouts only
// keep a broken build from hanging.
#include <chrono>
#include <condition_variable>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "engine/serving/engine.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/engine_test_util.h"

namespace mcserve::engine {
namespace {

using namespace testing;  // NOLINT: the engine test helpers

// A consumer that stops reading fills its channel and stops being scheduled; others proceed;
// reading again resumes it.
TEST(EngineTest, BackpressureSkipsAFullChannelOnly) {
  constexpr int kCapacity = 4;
  Fixture f = Make(2, 16, 0, 256, kCapacity);
  std::vector<int32_t> slow_prompt = Prompt(6, 1), fast_prompt = Prompt(7, 2);
  auto slow = MustSubmit(*f.engine, Spec(slow_prompt, 40));
  auto fast = MustSubmit(*f.engine, Spec(fast_prompt, 40));
  Result rf = Collect(*fast);
  ASSERT_TRUE(rf.status.ok()) << rf.status;
  EXPECT_EQ(rf.tokens, Greedy(*f.fake, fast_prompt, 40));
  // The slow one produced exactly what fits its channel: its last decode consumed token 3.
  const int slow_slot = f.fake->begun().front() == slow_prompt ? 0 : 1;
  EXPECT_EQ(f.fake->history_size(slow_slot), 6 + kCapacity - 1);
  EXPECT_EQ(f.engine->Stats().running, 1);
  Result rs = Collect(*slow);
  ASSERT_TRUE(rs.status.ok()) << rs.status;
  EXPECT_EQ(rs.tokens, Greedy(*f.fake, slow_prompt, 40));
  EXPECT_EQ(f.fake->violations(), 0);
}

// A row with a NaN or an infinity anywhere (first, last, in between) ends its own request with an
// error naming it; the clean request in the same batches goes on.
TEST(EngineTest, ANonFiniteLogitEndsOnlyItsRequest) {
  Fixture f = Make(4, 64);
  const int64_t vocab = Tok().vocab_size();
  const std::vector<std::pair<int64_t, float>> bad = {{0, std::numeric_limits<float>::quiet_NaN()},
                                                      {vocab - 1, std::numeric_limits<float>::infinity()},
                                                      {vocab / 2 + 1, -std::numeric_limits<float>::infinity()}};
  std::vector<std::shared_ptr<RequestHandle>> handles;
  for (size_t i = 0; i < bad.size(); ++i) {
    std::vector<int32_t> prompt = Prompt(4, static_cast<int>(i));
    prompt.back() = static_cast<int32_t>(300 + i);  // the last prompt token poisons the row
    f.fake->SetNonFiniteLogit(prompt.back(), bad[i].first, bad[i].second);
    handles.push_back(MustSubmit(*f.engine, Spec(prompt, 5)));
  }
  const std::vector<int32_t> clean = Prompt(4, 9);
  auto ok = MustSubmit(*f.engine, Spec(clean, 5));
  for (size_t i = 0; i < handles.size(); ++i) {
    Result r = Collect(*handles[i]);
    EXPECT_EQ(r.final_event.finish, FinishReason::kError) << i;
    EXPECT_NE(r.final_event.error.message().find("non-finite"), std::string::npos) << r.final_event.error;
    EXPECT_TRUE(r.tokens.empty()) << i;
  }
  Result r = Collect(*ok);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.tokens, Greedy(*f.fake, clean, 5));
}

// A step's consumers are woken after all of its token events are queued: a listener woken by one
// request's token already finds the other decoding request's token of the same step (one wake-up of a
// shared consumer a step, as a front end's event loop gets, not one per request).
TEST(EngineTest, ListenersRunAfterTheWholeStepIsQueued) {
  Fixture f = Make(2, 64);
  f.fake->PauseAtStep(0);
  auto a = MustSubmit(*f.engine, Spec(Prompt(5, 1), 12));
  ASSERT_TRUE(f.fake->WaitBlocked());
  auto b = MustSubmit(*f.engine, Spec(Prompt(5, 2), 6));  // joins at step 1; a runs on after b ends
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::pair<int, int>> calls;  // per listener call: token events drained from a, from b
  int finals = 0;
  auto drain = [&](RequestHandle& h, int* tokens) {
    for (auto e = h.TryNext(); e; e = h.TryNext()) {
      if (e->is_final()) {
        ++finals;
      } else {
        ++*tokens;
      }
    }
  };
  auto listener = [&] {
    std::lock_guard<std::mutex> lock(mu);
    int from_a = 0, from_b = 0;
    drain(*a, &from_a);
    drain(*b, &from_b);
    calls.emplace_back(from_a, from_b);
    cv.notify_all();
  };
  a->OnOutput(listener);
  b->OnOutput(listener);
  f.fake->Resume();
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return finals == 2; }));
  }
  a->OnOutput(nullptr);
  b->OnOutput(nullptr);
  int b_tokens = 0;
  for (const auto& [from_a, from_b] : calls) {
    b_tokens += from_b;
    if (from_b > 0) EXPECT_EQ(from_a, from_b) << "b's token was delivered without a's of the same step";
  }
  EXPECT_EQ(b_tokens, 5) << "b's sixth token is its final event";
  EXPECT_EQ(f.fake->violations(), 0);
}

// An engine over a one-slot fake runner whose output channels hold two events, with `write_timeout`.
absl::StatusOr<std::unique_ptr<Engine>> OneSlotEngine(absl::Duration write_timeout) {
  FakeModelRunner::Options o;
  o.num_slots = 1;
  o.vocab = Tok().vocab_size();
  o.never_pick = {Tok().eos_id(), Tok().bos_id(), 0};
  EngineOptions eo;
  eo.max_batch_tokens = 16;
  eo.max_prompt_tokens = 4096;
  eo.channel_capacity = 2;
  eo.write_timeout = write_timeout;
  return Engine::Create(std::make_unique<FakeModelRunner>(o), &Tok(), eo);
}

// A client that stops reading fills its channel; after the write timeout its request is cancelled
// (final event kCancelled with DEADLINE_EXCEEDED), its slot goes to the next request, and the
// engine counts it.
TEST(EngineTest, WriteTimeoutFreesTheSlotOfAReaderThatStopped) {
  auto engine = OneSlotEngine(absl::Milliseconds(50));
  ASSERT_TRUE(engine.ok()) << engine.status();
  auto stalled = MustSubmit(**engine, Spec(Prompt(5, 1), 1000));
  auto next = MustSubmit(**engine, Spec(Prompt(5, 2), 8));
  Result rn = Collect(*next);  // runs only once the stalled one lost its slot
  ASSERT_TRUE(rn.status.ok()) << rn.status;
  EXPECT_EQ(rn.tokens.size(), 8u);
  EXPECT_EQ(rn.final_event.finish, FinishReason::kLength);
  Result rs = Collect(*stalled);
  ASSERT_TRUE(rs.status.ok()) << rs.status;
  EXPECT_EQ(rs.tokens.size(), 2u) << "exactly what fitted the channel";
  EXPECT_EQ(rs.final_event.finish, FinishReason::kCancelled);
  EXPECT_TRUE(absl::IsDeadlineExceeded(rs.final_event.error)) << rs.final_event.error;
  EXPECT_NE(rs.final_event.error.message().find("write timeout"), std::string::npos);
  EXPECT_EQ((*engine)->Stats().write_timeouts, 1);
}

// A reader slower than the model keeps its channel full most of the time, but each event it takes
// restarts the write timeout: it is never cancelled although it runs for longer than the timeout.
TEST(EngineTest, WriteTimeoutSparesASlowButSteadyReader) {
  auto engine = OneSlotEngine(absl::Milliseconds(250));
  ASSERT_TRUE(engine.ok()) << engine.status();
  auto h = MustSubmit(**engine, Spec(Prompt(5, 3), 600));
  int tokens = 0;
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    absl::StatusOr<OutputEvent> e = h->Next(kTimeout);
    ASSERT_TRUE(e.ok()) << e.status();
    if (e->token_id >= 0) ++tokens;
    if (e->is_final()) {
      EXPECT_EQ(e->finish, FinishReason::kLength) << e->error;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(tokens, 600);
  EXPECT_GT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(250)) << "ran past the timeout";
  EXPECT_EQ((*engine)->Stats().write_timeouts, 0);
}

}  // namespace
}  // namespace mcserve::engine
