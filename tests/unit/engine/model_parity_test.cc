// The engine against the PyTorch reference on every committed fixture: full-prompt logits,
// greedy generation, chunked prefill ≡ token-by-token decode, and batching ≡ running alone.
#include <numeric>
#include <set>
#include <string>

#include "engine/runner/model.h"
#include "fixture_util.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/reference_generate.h"
#include "tests/unit/engine/segmented_forward.h"

namespace mcserve::engine {
namespace {

using testing::FixtureDir;
using testing::Golden;
using testing::Generate;
using testing::GenerateOptions;
using testing::RelativeError;

constexpr double kLogitTolerance = 1e-4;  // relative, fp32 (issue #2)

class ModelParityTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto m = Model::Load(FixtureDir(GetParam()), {.num_threads = 2});
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = std::move(*m);
    golden_ = testing::LoadGolden(GetParam());
    ASSERT_FALSE(golden_.prompt_ids.empty());
    ASSERT_EQ(golden_.vocab, model_->config().vocab_size);
  }

  // Logits of every prompt token, prefilling in chunks of `chunk` tokens on a fresh slot.
  std::vector<float> PromptLogits(int chunk) {
    auto pool = model_->NewStatePool(1);
    EXPECT_TRUE(pool.ok()) << pool.status();
    std::vector<float> all;
    std::span<const int32_t> prompt = golden_.prompt_ids;
    for (size_t begin = 0; begin < prompt.size(); begin += chunk) {
      SequenceChunk c{.slot = 0, .tokens = prompt.subspan(begin, std::min<size_t>(chunk, prompt.size() - begin)),
                      .all_logits = true};
      auto logits = testing::RunSegmented(*model_, *pool, {&c, 1});  // armt: closes between segments
      EXPECT_TRUE(logits.ok()) << logits.status();
      if (!logits.ok()) return {};
      all.insert(all.end(), (*logits)[0].begin(), (*logits)[0].end());
    }
    return all;
  }

  std::unique_ptr<Model> model_;
  Golden golden_;
};

TEST_P(ModelParityTest, PromptLogitsMatchReference) {
  const std::vector<float> logits = PromptLogits(static_cast<int>(golden_.prompt_ids.size()));
  EXPECT_LE(RelativeError(logits, golden_.logits), kLogitTolerance);
}

TEST_P(ModelParityTest, GreedyGenerationMatchesReference) {
  auto pool = model_->NewStatePool(1);
  ASSERT_TRUE(pool.ok());
  GenerateOptions options{.max_tokens = static_cast<int>(golden_.greedy_ids.size()), .prefill_chunk = 64,
                          .stop_at_eos = false, .sampling = {.temperature = 0.0f}};
  auto generated = Generate(*model_, *pool, 0, golden_.prompt_ids, options);
  ASSERT_TRUE(generated.ok()) << generated.status();
  EXPECT_EQ(*generated, golden_.greedy_ids);
}

TEST_P(ModelParityTest, ChunkedPrefillEqualsTokenByTokenDecode) {
  const std::vector<float> decode = PromptLogits(1);
  for (int chunk : {7, 64}) {
    EXPECT_LE(RelativeError(PromptLogits(chunk), decode), 1e-5) << "chunk " << chunk;
  }
}

TEST_P(ModelParityTest, BatchEqualsEachRequestAlone) {
  // Three requests with prompts of different lengths, in non-contiguous slots of one pool.
  const std::vector<int32_t>& p = golden_.prompt_ids;
  const std::vector<std::vector<int32_t>> prompts = {
      {p.begin(), p.begin() + 5}, {p.begin() + 3, p.end()}, {p.begin() + 10, p.begin() + 22}};
  const std::vector<int> slots = {3, 0, 2};
  auto batch_pool = model_->NewStatePool(4);
  ASSERT_TRUE(batch_pool.ok());
  std::vector<SequenceChunk> chunks;
  for (size_t i = 0; i < prompts.size(); ++i) chunks.push_back({.slot = slots[i], .tokens = prompts[i]});
  // Prefill all three at once, then two batched decode steps of a fixed token.
  std::vector<std::vector<float>> batched(prompts.size());
  const int32_t next_tokens[2] = {p[7], p[8]};
  for (int step = 0; step < 3; ++step) {
    if (step > 0) {
      for (auto& c : chunks) c.tokens = {&next_tokens[step - 1], 1};
    }
    auto logits = testing::RunSegmented(*model_, *batch_pool, chunks);
    ASSERT_TRUE(logits.ok()) << logits.status();
    for (size_t i = 0; i < prompts.size(); ++i) batched[i].insert(batched[i].end(), (*logits)[i].begin(), (*logits)[i].end());
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto pool = model_->NewStatePool(1);
    ASSERT_TRUE(pool.ok());
    std::vector<float> alone;
    std::vector<SequenceChunk> c = {{.slot = 0, .tokens = prompts[i]}};
    for (int step = 0; step < 3; ++step) {
      if (step > 0) c[0].tokens = {&next_tokens[step - 1], 1};
      auto logits = testing::RunSegmented(*model_, *pool, c);
      ASSERT_TRUE(logits.ok());
      alone.insert(alone.end(), (*logits)[0].begin(), (*logits)[0].end());
    }
    EXPECT_LE(RelativeError(batched[i], alone), 1e-5) << "request " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ModelParityTest, ::testing::ValuesIn(testing::FixtureNames()),
                         [](const auto& info) { return info.param; });

TEST(ModelParity, EveryFamilyHasAFixture) {
  std::set<std::string> types;
  for (const std::string& name : testing::FixtureNames()) {
    auto config = LoadModelConfig(FixtureDir(name));
    ASSERT_TRUE(config.ok()) << config.status();
    types.insert(config->model_type);
  }
  EXPECT_EQ(types,
            (std::set<std::string>{"linear_attn", "gla", "delta_net", "gated_deltanet", "swla", "titans", "dla",
                                    "lattice", "hope", "gam", "armt"}));
}

}  // namespace
}  // namespace mcserve::engine
