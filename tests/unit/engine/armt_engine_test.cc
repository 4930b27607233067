// armt served by the Engine (engine loop + RecurrentRunner + Model) on its fixtures: the golden
// greedy ids; concurrent requests of mixed lengths give exactly the tokens each gives alone, with
// segment closes batched beside other requests' decodes (a recording runner sees the batches);
// prefix reuse resumes right after a segment close and gives bit-identical tokens and log-probs; a
// 64-request mixed workload (sampled, aborted, prefix hits) leaks no slot or page.
#include <algorithm>
#include <bit>
#include <cmath>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/serving/engine.h"
#include "engine/serving/recurrent_runner.h"
#include "fixture_util.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/served_requests.h"

namespace mcserve::engine {
namespace {

using mcserve::testing::Drain;
using mcserve::testing::FixtureDir;
using mcserve::testing::MixedSpec;
using mcserve::testing::Outcome;
using mcserve::testing::RunMixedAlone;
using mcserve::testing::RunMixedTogether;
using mcserve::testing::LoadGolden;

// Forwards to a RecurrentRunner and records each step's chunks (slot, tokens, close).
class RecordingRunner : public ModelRunner {
 public:
  struct Chunk {
    int slot;
    size_t tokens;
    bool close;
  };
  explicit RecordingRunner(std::unique_ptr<RecurrentRunner> inner) : inner_(std::move(inner)) {}
  int num_slots() const override { return inner_->num_slots(); }
  int vocab_size() const override { return inner_->vocab_size(); }
  int64_t boundary_tokens() const override { return inner_->boundary_tokens(); }
  int64_t SegmentTokensLeft(int slot) const override { return inner_->SegmentTokensLeft(slot); }
  int64_t close_tokens() const override { return inner_->close_tokens(); }
  int num_free_slots() const override { return inner_->num_free_slots(); }
  int64_t position(int slot) const override { return inner_->position(slot); }
  absl::StatusOr<BeginResult> Begin(std::span<const int32_t> prompt) override { return inner_->Begin(prompt); }
  absl::StatusOr<StepOutput> Step(std::span<const SequenceChunk> batch) override {
    std::vector<Chunk> step;
    for (const SequenceChunk& c : batch) step.push_back({c.slot, c.tokens.size(), c.close_segment});
    {
      std::lock_guard<std::mutex> lock(mu_);
      steps_.push_back(std::move(step));
    }
    return inner_->Step(batch);
  }
  void End(int slot) override { inner_->End(slot); }
  RunnerStats stats() const override { return inner_->stats(); }
  std::vector<std::vector<Chunk>> steps() const {
    std::lock_guard<std::mutex> lock(mu_);
    return steps_;
  }
  RecurrentRunner& inner() { return *inner_; }

 private:
  std::unique_ptr<RecurrentRunner> inner_;
  mutable std::mutex mu_;
  std::vector<std::vector<Chunk>> steps_;
};

struct Served {
  std::unique_ptr<Model> model;
  std::unique_ptr<Engine> engine;
  RecordingRunner* runner = nullptr;  // owned by the engine
};

Served Serve(const std::string& fixture, int slots, int64_t max_batch_tokens) {
  Served s;
  auto model = Model::Load(FixtureDir(fixture), {.num_threads = 1});
  EXPECT_TRUE(model.ok()) << model.status();
  s.model = std::move(*model);
  auto runner = RecurrentRunner::Create(s.model.get(), {.num_slots = slots, .prefix_block = 8});
  EXPECT_TRUE(runner.ok()) << runner.status();
  auto recording = std::make_unique<RecordingRunner>(std::move(*runner));
  s.runner = recording.get();
  auto engine = Engine::Create(std::move(recording), &s.model->tokenizer(),
                               {.max_waiting = 256, .max_batch_tokens = max_batch_tokens});
  EXPECT_TRUE(engine.ok()) << engine.status();
  s.engine = std::move(*engine);
  return s;
}

TEST(ArmtEngineTest, GreedyIdsMatchTheReference) {
  for (const char* name : {"armt", "armt_wrap"}) {
    Served s = Serve(name, 2, 16);
    const ::mcserve::testing::Golden g = LoadGolden(name);
    RequestSpec spec;
    spec.prompt = g.prompt_ids;
    spec.sampling.temperature = 0.0f;
    spec.stop.max_tokens = static_cast<int>(g.greedy_ids.size());
    spec.stop.ignore_eos = true;
    auto handle = s.engine->Submit(spec);
    ASSERT_TRUE(handle.ok()) << handle.status();
    EXPECT_EQ(Drain(**handle).tokens, g.greedy_ids) << name;
  }
}

TEST(ArmtEngineTest, PromptLogprobsAcrossClosesMatchTheReference) {
  Served s = Serve("armt", 2, 5);  // prefill chunks of at most 5 tokens, closes between segments of 6
  const ::mcserve::testing::Golden g = LoadGolden("armt");
  RequestSpec spec;
  spec.prompt = g.prompt_ids;
  spec.prompt_logprobs = true;
  spec.sampling.temperature = 0.0f;
  spec.stop.max_tokens = 1;
  auto handle = s.engine->Submit(spec);
  ASSERT_TRUE(handle.ok()) << handle.status();
  std::vector<float> scored;
  while (true) {
    auto event = (*handle)->Next(absl::Seconds(120));
    ASSERT_TRUE(event.ok());
    if (!event->prompt_logprobs.empty()) scored = event->prompt_logprobs;
    if (event->is_final()) break;
  }
  ASSERT_EQ(scored.size(), g.prompt_ids.size() - 1);
  for (size_t i = 1; i < g.prompt_ids.size(); ++i) {  // log p(prompt[i] | prompt[<i]) from row i − 1
    const float* row = g.logits.data() + (i - 1) * g.vocab;
    double m = row[0], z = 0;
    for (int64_t v = 0; v < g.vocab; ++v) m = std::max(m, double(row[v]));
    for (int64_t v = 0; v < g.vocab; ++v) z += std::exp(row[v] - m);
    const double want = row[g.prompt_ids[i]] - m - std::log(z);
    EXPECT_NEAR(scored[i - 1], want, 1e-4 * (1 + std::abs(want))) << "prompt token " << i;
  }
}

TEST(ArmtEngineTest, ConcurrentRequestsGiveExactlyTheTokensEachGivesAloneWithClosesBatched) {
  constexpr int kRequests = 16;
  std::vector<Outcome> alone;
  {
    Served s = Serve("armt", 1, 64);
    alone = RunMixedAlone(*s.engine, static_cast<int>(s.model->config().vocab_size), kRequests);
  }
  for (int r = 0; r < kRequests; ++r) {
    ASSERT_EQ(alone[r].finish, FinishReason::kLength);
  }
  Served s = Serve("armt", 6, 24);  // more requests than slots; prompts split over steps
  const int vocab = static_cast<int>(s.model->config().vocab_size);
  const std::vector<Outcome> together = RunMixedTogether(*s.engine, vocab, kRequests);
  ASSERT_EQ(together.size(), alone.size());
  for (int r = 0; r < kRequests; ++r) EXPECT_EQ(together[r].tokens, alone[r].tokens) << "request " << r;
  int closes = 0, closes_beside_decodes = 0;
  for (const auto& step : s.runner->steps()) {
    int c = 0, decodes = 0;
    for (const auto& chunk : step) {
      c += chunk.close;
      decodes += !chunk.close && chunk.tokens == 1;
    }
    closes += c;
    closes_beside_decodes += c > 0 && decodes > 0;
  }
  EXPECT_GT(closes, 0);
  EXPECT_GT(closes_beside_decodes, 0);
  EXPECT_EQ(s.engine->Stats().slots_used, 0);
}

TEST(ArmtEngineTest, PrefixReuseResumesBitIdentically) {
  Served s = Serve("armt", 1, 64);  // S 6: prefix blocks of 12 tokens
  EXPECT_EQ(s.runner->boundary_tokens(), 12);
  const int vocab = static_cast<int>(s.model->config().vocab_size);
  RequestSpec spec = MixedSpec(4, vocab, 14);  // a 30-token prompt
  ASSERT_EQ(spec.prompt.size(), 30u);
  auto first = s.engine->Submit(spec);
  ASSERT_TRUE(first.ok());
  const Outcome fresh = Drain(**first);
  auto second = s.engine->Submit(spec);
  ASSERT_TRUE(second.ok());
  const Outcome resumed = Drain(**second);
  EXPECT_EQ(fresh.cached, 0);
  EXPECT_EQ(resumed.cached, 24);  // two blocks, each snapshotted right after its segment's close
  EXPECT_EQ(resumed.tokens, fresh.tokens);
  ASSERT_EQ(resumed.logprobs.size(), fresh.logprobs.size());
  for (size_t i = 0; i < fresh.logprobs.size(); ++i) {
    EXPECT_EQ(std::bit_cast<uint32_t>(resumed.logprobs[i]), std::bit_cast<uint32_t>(fresh.logprobs[i])) << i;
  }
  // A snapshot holds every layer's A [F, D] and z [F] only: the open segment's KV (scratch) is not copied.
  const ModelConfig& c = s.model->config();
  const int64_t snapshot_bytes = c.num_hidden_layers * (c.armt.feat_dim * c.hidden_size + c.armt.feat_dim) * 4;
  const RunnerStats stats = s.engine->Stats().runner;  // as of the last finish
  EXPECT_EQ(stats.prefix_cache_entries, 2);
  EXPECT_EQ(stats.prefix_cache_bytes, 2 * snapshot_bytes);
  s.engine->Shutdown();
  EXPECT_TRUE(s.runner->inner().SanityCheck().ok());
}

TEST(ArmtEngineTest, SixtyFourMixedRequestsFinishWithNothingLeaked) {
  Served s = Serve("armt", 8, 64);
  const int vocab = static_cast<int>(s.model->config().vocab_size);
  const mcserve::testing::MixedResult mixed = mcserve::testing::RunSixtyFourMixedRequests(*s.engine, vocab);
  EXPECT_EQ(mixed.cancelled + mixed.finished, 64);
  EXPECT_GT(mixed.finished, 0);
  const EngineStats stats = s.engine->Stats();
  EXPECT_EQ(stats.slots_used, 0);
  EXPECT_EQ(stats.running, 0);
  EXPECT_EQ(stats.waiting, 0);
  EXPECT_EQ(stats.runner.referenced_pages, 0);
  EXPECT_GT(stats.prompt_tokens_cached, 0);  // the even requests share 16 prompt tokens: one 12-token block
  s.engine->Shutdown();
  EXPECT_TRUE(s.runner->inner().SanityCheck().ok()) << s.runner->inner().SanityCheck();
}

}  // namespace
}  // namespace mcserve::engine
