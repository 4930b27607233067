// The served gam family on its fixtures: the parameter count at load, parity with the reference's
// golden logits for several prompt lengths, chunk invariance over a 300-token sequence (chunk sizes
// 1, 2, 3, 17, 256), the state rebuilt from the last n_layer·(k−1) tokens at their positions, and
// the position limit (Model::Forward and Engine::Submit name block_size; clamp runs past it).
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "engine/runner/model.h"
#include "engine/serving/engine.h"
#include "engine/serving/recurrent_runner.h"
#include "fixture_util.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/model_test_util.h"

namespace mcserve::engine {
namespace {

using ::mcserve::testing::FixtureDir;
using ::mcserve::testing::LoadGolden;
using ::mcserve::testing::RelativeError;
using testing::HasError;

std::unique_ptr<Model> LoadGam(const std::string& name) {
  auto m = Model::Load(FixtureDir(name), {.num_threads = 2});
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? std::move(*m) : nullptr;
}

// Logits [rows, vocab] of one Forward of `tokens` on `slot` (every row when all_logits).
std::vector<float> Logits(const Model& m, StatePool& pool, int slot, std::span<const int32_t> tokens, bool all_logits) {
  SequenceChunk c{.slot = slot, .tokens = tokens, .all_logits = all_logits};
  auto logits = m.Forward({&c, 1}, pool);
  EXPECT_TRUE(logits.ok()) << logits.status();
  return logits.ok() ? *logits->ToHostF32() : std::vector<float>{};
}

// The golden prompt followed by deterministic ids in [3, vocab), `n` tokens in all.
std::vector<int32_t> LongSequence(const std::string& fixture, int64_t vocab, size_t n) {
  std::vector<int32_t> ids = LoadGolden(fixture).prompt_ids;
  std::mt19937 rng(7);
  while (ids.size() < n) ids.push_back(static_cast<int32_t>(3 + rng() % (vocab - 3)));
  ids.resize(n);
  return ids;
}

// (V + Np)·D + L·(kD + D + Ms·D + 2D² + 2D + 4D + 8D² + 4D + D) + 2D (docs/model-format.md, `gam`).
int64_t GamParameters(const ModelConfig& c) {
  const int64_t d = c.hidden_size, k = c.gam.conv_kernel_size, ms = c.gam.num_memory_slots;
  const int64_t layer = k * d + d + ms * d + 2 * d * d + 2 * d + 4 * d + 8 * d * d + 4 * d + d;
  return (c.vocab_size + c.gam.block_size) * d + c.num_hidden_layers * layer + 2 * d;
}

TEST(GamModelTest, ParameterCountAtLoad) {
  for (const char* name : {"gam", "gam_clamp"}) {
    auto m = LoadGam(name);
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->num_parameters(), GamParameters(m->config())) << name;
  }
  EXPECT_EQ(LoadGam("gam")->num_parameters(), 35328);  // 320·32 + 80·32 + 2·11232 + 64
  ModelConfig paper;  // the paper's model: 22,599,680 ("22.6M")
  paper.vocab_size = 10000;
  paper.hidden_size = 512;
  paper.num_hidden_layers = 6;
  paper.gam = {.block_size = 256, .num_memory_slots = 512, .conv_kernel_size = 3};
  EXPECT_EQ(GamParameters(paper), 22599680);
}

TEST(GamModelTest, ParityWithTheReferenceForSeveralPromptLengths) {
  for (const char* name : {"gam", "gam_clamp"}) {
    auto m = LoadGam(name);
    ASSERT_NE(m, nullptr);
    const ::mcserve::testing::Golden g = LoadGolden(name);
    const int64_t v = g.vocab;
    for (size_t len : {size_t{1}, size_t{2}, size_t{4}, size_t{11}, g.prompt_ids.size()}) {
      auto pool = m->NewStatePool(1);
      ASSERT_TRUE(pool.ok());
      const std::vector<float> last = Logits(*m, *pool, 0, std::span(g.prompt_ids).first(len), false);
      const std::vector<float> want(g.logits.begin() + (len - 1) * v, g.logits.begin() + len * v);
      EXPECT_LE(RelativeError(last, want), 1e-4) << name << " prompt length " << len;
    }
  }
}

TEST(GamModelTest, ChunkSizesGiveTheSameLogits) {
  auto m = LoadGam("gam_clamp");  // 300 tokens: positions past block_size 40 read row 30
  ASSERT_NE(m, nullptr);
  const std::vector<int32_t> ids = LongSequence("gam_clamp", m->config().vocab_size, 300);
  auto whole_pool = m->NewStatePool(1);
  ASSERT_TRUE(whole_pool.ok());
  const std::vector<float> whole = Logits(*m, *whole_pool, 0, ids, true);
  for (size_t chunk : {1, 2, 3, 17, 256}) {
    auto pool = m->NewStatePool(2);
    ASSERT_TRUE(pool.ok());
    std::vector<float> all;
    for (size_t b = 0; b < ids.size(); b += chunk) {
      const std::vector<float> part =
          Logits(*m, *pool, 1, std::span(ids).subspan(b, std::min(chunk, ids.size() - b)), true);
      all.insert(all.end(), part.begin(), part.end());
    }
    EXPECT_LE(RelativeError(all, whole), 1e-5) << "chunk " << chunk;
  }
}

// Per layer, slot `slot`'s conv window [k−1, D].
std::vector<std::vector<float>> ConvState(StatePool& pool, int layers, int slot) {
  std::vector<std::vector<float>> out;
  for (int l = 0; l < layers; ++l) {
    const kernels::Tensor& t = pool.layer(l).at("conv");
    const std::vector<float> all = *t.ToHostF32();
    const int64_t per = t.numel() / t.dim(0);
    out.emplace_back(all.begin() + slot * per, all.begin() + (slot + 1) * per);
  }
  return out;
}

TEST(GamModelTest, StateRebuiltFromTheLastTokens) {
  for (auto [name, t] : {std::pair<const char*, size_t>{"gam", 70}, {"gam_clamp", 150}}) {
    auto m = LoadGam(name);
    ASSERT_NE(m, nullptr);
    const int layers = static_cast<int>(m->config().num_hidden_layers);
    const size_t r = static_cast<size_t>(m->config().gam.receptive_tokens);
    const std::vector<int32_t> ids = LongSequence(name, m->config().vocab_size, t + 1);
    auto pool = m->NewStatePool(2);
    ASSERT_TRUE(pool.ok());
    Logits(*m, *pool, 0, std::span(ids).first(t), false);
    // Slot 1: only the last r tokens, at their original positions t − r ..., from zero windows.
    pool->Advance(1, static_cast<int64_t>(t - r));
    Logits(*m, *pool, 1, std::span(ids).subspan(t - r, r), false);
    const auto full = ConvState(*pool, layers, 0), rebuilt = ConvState(*pool, layers, 1);
    for (int l = 0; l < layers; ++l) EXPECT_LE(RelativeError(rebuilt[l], full[l]), 1e-5) << name << " layer " << l;
    const std::span<const int32_t> next = std::span(ids).subspan(t, 1);
    EXPECT_LE(RelativeError(Logits(*m, *pool, 1, next, false), Logits(*m, *pool, 0, next, false)), 1e-5) << name;
    // One token fewer is not enough: the window of the last layer then differs.
    auto short_pool = m->NewStatePool(1);
    ASSERT_TRUE(short_pool.ok());
    short_pool->Advance(0, static_cast<int64_t>(t - r + 1));
    Logits(*m, *short_pool, 0, std::span(ids).subspan(t - r + 1, r - 1), false);
    EXPECT_GT(RelativeError(ConvState(*short_pool, layers, 0)[layers - 1], full[layers - 1]), 1e-3) << name;
  }
}

TEST(GamModelTest, ForwardRefusesPositionsPastTheTableNamingBlockSize) {
  auto m = LoadGam("gam");  // block_size 80, position_overflow error
  ASSERT_NE(m, nullptr);
  const std::vector<int32_t> ids = LongSequence("gam", m->config().vocab_size, 81);
  auto pool = m->NewStatePool(1);
  ASSERT_TRUE(pool.ok());
  SequenceChunk too_long{.slot = 0, .tokens = ids};
  EXPECT_TRUE(HasError(m->Forward({&too_long, 1}, *pool).status(), absl::StatusCode::kInvalidArgument,
                       {"position 80", "block_size = 80", "position_overflow: clamp"}));
  EXPECT_EQ(pool->position(0), 0);  // refused before any state changed
  Logits(*m, *pool, 0, std::span(ids).first(80), false);
  SequenceChunk one_more{.slot = 0, .tokens = std::span(ids).subspan(80, 1)};
  EXPECT_TRUE(HasError(m->Forward({&one_more, 1}, *pool).status(), absl::StatusCode::kInvalidArgument,
                       {"block_size = 80"}));
  EXPECT_EQ(m->config().max_positions(), 80);
  EXPECT_EQ(LoadGam("gam_clamp")->config().max_positions(), 0);  // clamp: no limit
}

TEST(GamModelTest, SubmitRefusesPromptPlusMaxTokensPastBlockSize) {
  auto m = LoadGam("gam");
  ASSERT_NE(m, nullptr);
  auto runner = RecurrentRunner::Create(m.get(), {.num_slots = 1});
  ASSERT_TRUE(runner.ok()) << runner.status();
  auto engine = Engine::Create(std::move(*runner), &m->tokenizer(), {.max_batch_tokens = 64});
  ASSERT_TRUE(engine.ok()) << engine.status();
  RequestSpec spec;
  spec.prompt = LoadGolden("gam").prompt_ids;  // 26 tokens
  spec.stop.max_tokens = 80 - static_cast<int>(spec.prompt.size()) + 1;
  EXPECT_TRUE(HasError((*engine)->Submit(spec).status(), absl::StatusCode::kInvalidArgument,
                       {"block_size = 80"}));
  spec.stop.max_tokens -= 1;
  EXPECT_TRUE((*engine)->Submit(spec).ok());
  (*engine)->Shutdown();
}

TEST(GamModelTest, MemoryCachingIsRefusedNamingTheFamily) {
  auto m = Model::Load(FixtureDir("gam"), {.mc_overrides = {{"aggregation", "grm"}}});
  EXPECT_TRUE(HasError(m.status(), absl::StatusCode::kUnimplemented, {"gam", "Memory Caching"}));
}

}  // namespace
}  // namespace mcserve::engine
