// The Engine end to end on real fixtures (engine loop thread + RecurrentRunner + Model): concurrent
// requests of mixed lengths give exactly the greedy tokens each gives alone; a 64-request mixed
// workload (SSC with its pages on the host tier, prefix reuse, cancellations) runs to completion and
// leaves no slot or page referenced.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <ostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "engine/model/safetensors.h"
#include "engine/serving/engine.h"
#include "engine/serving/recurrent_runner.h"
#include "fixture_util.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/served_requests.h"
#include "tests/unit/engine/model_test_util.h"

namespace mcserve::engine {
namespace {

using mcserve::testing::Drain;
using mcserve::testing::FixtureDir;
using mcserve::testing::MixedSpec;
using mcserve::testing::Outcome;
using mcserve::testing::RunMixedAlone;
using mcserve::testing::RunMixedTogether;
using testing::CopyFixturePatched;  // model_test_util.h
using testing::PutF32;

struct Served {
  std::unique_ptr<Model> model;
  std::unique_ptr<Engine> engine;
  RecurrentRunner* runner = nullptr;  // owned by the engine
};

Served Serve(const std::string& fixture, const std::map<std::string, std::string>& mc, int slots,
             const CheckpointStoreOptions& store, int64_t max_batch_tokens) {
  Served s;
  auto model = Model::Load(FixtureDir(fixture), {.num_threads = 1, .mc_overrides = mc});
  EXPECT_TRUE(model.ok()) << model.status();
  s.model = std::move(*model);
  auto runner = RecurrentRunner::Create(s.model.get(), {.num_slots = slots, .checkpoints = store, .prefix_block = 8});
  EXPECT_TRUE(runner.ok()) << runner.status();
  s.runner = runner->get();
  auto engine = Engine::Create(std::move(*runner), &s.model->tokenizer(),
                               {.max_waiting = 256, .max_batch_tokens = max_batch_tokens});
  EXPECT_TRUE(engine.ok()) << engine.status();
  s.engine = std::move(*engine);
  return s;
}

// A fixture and the aggregation the concurrency test serves it with: a matrix memory, and both MLP
// memories (soup reads the online weights row by row; dla's inner chunks of 4 cross requests' steps),
// lattice, and hope (M_mem cached; its anchors of 4 and 3 tokens cross requests' steps); hope with an
// adaptive CMS runs without MC (not defined there): its prompts train, its generated tokens do not.
struct ServedCase {
  std::string fixture, aggregation;
};

// A failing case names its servedcase (not its bytes).
void PrintTo(const ServedCase& c, std::ostream* os) { *os << c.fixture << " (" << c.aggregation << ")"; }

class EngineEndToEndTest : public ::testing::TestWithParam<ServedCase> {};

TEST_P(EngineEndToEndTest, ConcurrentRequestsGiveExactlyTheTokensEachGivesAlone) {
  const std::string& fixture = GetParam().fixture;
  const std::map<std::string, std::string> mc = {{"aggregation", GetParam().aggregation}, {"segment_size", "4"}};
  constexpr int kRequests = 16;
  std::vector<Outcome> alone;
  {
    Served s = Serve(fixture, mc, 1, {}, 64);
    alone = RunMixedAlone(*s.engine, static_cast<int>(s.model->config().vocab_size), kRequests);
  }
  for (int r = 0; r < kRequests; ++r) {
    ASSERT_EQ(alone[r].finish, FinishReason::kLength);
    ASSERT_EQ(static_cast<int>(alone[r].tokens.size()), 1 + r % 12);
  }
  // All at once, more requests than slots, a token budget that splits prompts over steps.
  Served s = Serve(fixture, mc, 6, {}, 24);
  const int vocab = static_cast<int>(s.model->config().vocab_size);
  const std::vector<Outcome> together = RunMixedTogether(*s.engine, vocab, kRequests);
  ASSERT_EQ(together.size(), alone.size());
  for (int r = 0; r < kRequests; ++r) EXPECT_EQ(together[r].tokens, alone[r].tokens) << "request " << r;
  const EngineStats stats = s.engine->Stats();
  EXPECT_EQ(stats.slots_used, 0);
  EXPECT_GT(stats.prompt_tokens_cached, 0);  // the even requests share 16 prompt tokens
}

TEST_P(EngineEndToEndTest, SixtyFourMixedRequestsFinishWithNothingLeaked) {
  std::map<std::string, std::string> mc = {{"aggregation", "ssc"}, {"segment_size", "4"}, {"top_k", "2"}};
  if (GetParam().aggregation == "none") mc = {{"aggregation", "none"}};  // MC off (adaptive CMS)
  Served s = Serve(GetParam().fixture, mc, 8, {.device_bytes = 0, .hot_pages = 4}, 64);
  const int vocab = static_cast<int>(s.model->config().vocab_size);
  const mcserve::testing::MixedResult mixed = mcserve::testing::RunSixtyFourMixedRequests(*s.engine, vocab);
  EXPECT_EQ(mixed.cancelled + mixed.finished, 64);
  EXPECT_GT(mixed.finished, 0);
  const EngineStats stats = s.engine->Stats();
  EXPECT_EQ(stats.slots_used, 0);
  EXPECT_EQ(stats.running, 0);
  EXPECT_EQ(stats.waiting, 0);
  EXPECT_EQ(stats.runner.referenced_pages, 0);
  if (GetParam().aggregation != "none") {  // MC pages staged to the host tier
    EXPECT_GT(stats.runner.stagings, 0);
    EXPECT_GT(stats.runner.host_pages, 0);  // the prefix cache keeps some
  } else {
    EXPECT_GT(stats.prompt_tokens_cached, 0);  // prefixes resumed (with the adaptive CMS's state)
  }
  s.engine->Shutdown();  // the engine loop thread is gone: the runner can be inspected
  EXPECT_TRUE(s.runner->SanityCheck().ok()) << s.runner->SanityCheck();
}

// A copy of fixture `name` in `dir` whose embedding row `token` is NaN: any request that reads the token
// fills its own fast weights with NaN from there on.
void WritePoisonedCopy(const std::string& name, const std::string& dir, int token) {
  CopyFixturePatched(FixtureDir(name), dir, [&](const SafetensorsEntry& e, char* bytes) {
    if (e.name != "model.embeddings.weight") return;
    const int64_t hidden = e.shape[1];
    for (int64_t j = 0; j < hidden; ++j) PutF32(bytes, token * hidden + j, std::numeric_limits<float>::quiet_NaN());
  });
}

// A request whose state turns NaN ends with an error; a request running beside it in the same
// batches is untouched and the engine serves on.
TEST(EngineNumericalErrorTest, ANonFiniteStateEndsOnlyItsRequest) {
  // Untied embeddings: a NaN row of a tied table would also be every request's lm_head row.
  const std::string kFixture = "hope_variants";
  const RequestSpec clean = MixedSpec(1, 320, 12);
  std::vector<int32_t> expected;
  {
    Served s = Serve(kFixture, {{"aggregation", "none"}}, 2, {}, 64);
    auto handle = s.engine->Submit(clean);
    ASSERT_TRUE(handle.ok());
    expected = Drain(**handle).tokens;
  }
  // A token the clean request never reads, placed at position 5 of the other prompt.
  int poison = 3;
  while (std::find(clean.prompt.begin(), clean.prompt.end(), poison) != clean.prompt.end() ||
         std::find(expected.begin(), expected.end(), poison) != expected.end()) {
    ++poison;
  }
  RequestSpec poisoned = MixedSpec(3, 320, 12);
  poisoned.prompt[5] = poison;
  testing::TempDir dir;
  WritePoisonedCopy(kFixture, dir.path(), poison);
  auto model = Model::Load(dir.path(), {.num_threads = 1});
  ASSERT_TRUE(model.ok()) << model.status();
  auto runner = RecurrentRunner::Create(model->get(), {.num_slots = 2});
  ASSERT_TRUE(runner.ok());
  auto engine = Engine::Create(std::move(*runner), &(*model)->tokenizer(), {.max_batch_tokens = 4});
  ASSERT_TRUE(engine.ok());
  auto bad = (*engine)->Submit(poisoned);
  auto good = (*engine)->Submit(clean);
  ASSERT_TRUE(bad.ok() && good.ok());
  OutputEvent last;
  while (true) {
    auto event = (*bad)->Next(absl::Seconds(120));
    ASSERT_TRUE(event.ok());
    if (event->is_final()) {
      last = *event;
      break;
    }
  }
  EXPECT_EQ(last.finish, FinishReason::kError);
  EXPECT_NE(last.error.message().find("non-finite"), std::string::npos) << last.error;
  EXPECT_EQ(Drain(**good).tokens, expected);
  auto again = (*engine)->Submit(clean);  // the server goes on
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(Drain(**again).tokens, expected);
  EXPECT_EQ((*engine)->Stats().slots_used, 0);
}

INSTANTIATE_TEST_SUITE_P(Models, EngineEndToEndTest,
                         ::testing::Values(ServedCase{"gated_deltanet", "grm"}, ServedCase{"titans_mlp", "soup"},
                                           ServedCase{"dla", "grm"}, ServedCase{"lattice", "grm"},
                                           ServedCase{"hope", "grm"}, ServedCase{"hope_adaptive", "none"}),
                         [](const auto& info) { return info.param.fixture; });

}  // namespace
}  // namespace mcserve::engine
