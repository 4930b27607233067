// The Engine's scheduling of segment closes (armt) against the fake runner with segments: content
// chunks never cross the end of an open segment, a full segment is closed by a close chunk before
// the slot's next content (prefill or decode), a close is charged its M tokens of the step budget
// and is batched with other requests' decodes and prefill chunks, and the outputs are those of the
// fake's greedy rule (closes change no logits in the fake).
#include <algorithm>
#include <memory>
#include <vector>

#include "engine/serving/engine.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/engine_test_util.h"

namespace mcserve::engine {
namespace {

using namespace testing;  // NOLINT: the engine test helpers

Fixture MakeSegmented(int slots, int64_t budget, int64_t segment, int64_t close_tokens, int64_t boundary) {
  FakeModelRunner::Options o;
  o.num_slots = slots;
  o.vocab = Tok().vocab_size();
  o.boundary = boundary;
  o.segment = segment;
  o.close_tokens = close_tokens;
  o.never_pick = {Tok().eos_id(), Tok().bos_id(), 0};
  auto fake = std::make_unique<FakeModelRunner>(o);
  FakeModelRunner* raw = fake.get();
  EngineOptions eo;
  eo.max_batch_tokens = budget;
  eo.max_prompt_tokens = 4096;
  auto engine = Engine::Create(std::move(fake), &Tok(), eo);
  EXPECT_TRUE(engine.ok()) << engine.status();
  return {raw, std::move(*engine)};
}

TEST(EngineSegmentsTest, ClosesAreScheduledChargedAndBatched) {
  struct Case {
    int slots;
    int64_t budget, segment, close_tokens, boundary;
  } cases[] = {{1, 1, 3, 2, 0},  {2, 4, 5, 2, 5},   {4, 16, 6, 2, 6},  {4, 37, 8, 10, 16},
               {8, 64, 5, 3, 10}, {3, 200, 16, 4, 32}, {4, 5, 4, 8, 4}};
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "slots " << c.slots << " budget " << c.budget << " segment " << c.segment
                                      << " M " << c.close_tokens);
    Fixture f = MakeSegmented(c.slots, c.budget, c.segment, c.close_tokens, c.boundary);
    // Every request is queued before the second step runs, so what is batched with what does not
    // depend on how fast this thread submits.
    f.fake->PauseAtStep(1);
    std::vector<std::shared_ptr<RequestHandle>> hs;
    std::vector<std::vector<int32_t>> prompts;
    for (int i = 0; i < 10; ++i) {
      prompts.push_back(Prompt(1 + (i * 37) % 60, i));
      hs.push_back(MustSubmit(*f.engine, Spec(prompts.back(), 1 + (i * 7) % 13)));
    }
    f.fake->Resume();
    for (int i = 0; i < 10; ++i) {
      Result r = Collect(*hs[i]);
      ASSERT_TRUE(r.status.ok()) << r.status;
      EXPECT_EQ(r.tokens, Greedy(*f.fake, prompts[i], 1 + (i * 7) % 13));
    }
    const int64_t close_cost = std::min(c.close_tokens, c.budget);
    int closes = 0, closes_with_decodes = 0, closes_with_prefill = 0;
    for (const auto& step : f.fake->steps()) {
      int64_t total = 0;
      int step_closes = 0;
      bool decode = false, prefill = false;
      for (const auto& seq : step) {
        if (seq.close) {
          ++step_closes;
          total += close_cost;
          continue;
        }
        total += static_cast<int64_t>(seq.tokens.size());
        (seq.prefill() ? prefill : decode) = true;
      }
      EXPECT_LE(total, c.budget);
      closes += step_closes;
      closes_with_decodes += step_closes > 0 && decode;
      closes_with_prefill += step_closes > 0 && prefill;
    }
    EXPECT_GT(closes, 0);
    if (c.slots > 1 && c.budget >= close_cost + 1) EXPECT_GT(closes_with_decodes + closes_with_prefill, 0);
    EXPECT_EQ(f.fake->violations(), 0);  // no chunk past a segment end, no close of a non-full segment
    EXPECT_EQ(f.fake->decode_missing(), 0);
  }
}

TEST(EngineSegmentsTest, EverySegmentIsClosedBeforeItsSlotRunsOn) {
  Fixture f = MakeSegmented(2, 32, 4, 2, 0);
  const std::vector<int32_t> prompt = Prompt(10, 3);  // 10 = 2 full segments + 2
  Result r = Collect(*MustSubmit(*f.engine, Spec(prompt, 12)));
  ASSERT_TRUE(r.status.ok()) << r.status;
  // 10 prompt + 11 fed-back tokens = 21 content tokens: segments close at 4, 8, 12, 16, 20.
  int closes = 0;
  int64_t run = 0;
  for (const auto& step : f.fake->steps()) {
    for (const auto& seq : step) {
      if (seq.close) {
        EXPECT_EQ(run % 4, 0);
        EXPECT_EQ(run / 4, closes + 1);
        ++closes;
      } else {
        EXPECT_LE(run % 4 + static_cast<int64_t>(seq.tokens.size()), 4) << "content past the open segment";
        EXPECT_EQ(closes, run / 4) << "a full segment was not closed before content";
        run += static_cast<int64_t>(seq.tokens.size());
      }
    }
  }
  EXPECT_EQ(run, 21);
  EXPECT_EQ(closes, 5);
  EXPECT_EQ(f.fake->violations(), 0);
}

}  // namespace
}  // namespace mcserve::engine
