// The fused decode step (DeltaDecode, one op for a gated-delta layer's gates, convs, norms and memory)
// against the same steps op by op: a prompt, then batch-1 decode steps on the CPU, with the fusion on
// and then off (SetDecodeFusionOffForTesting), give the same logits bit for bit; the fused path runs
// on the fixtures it takes (every layer, every decode step) and on no other.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "engine/runner/model.h"
#include "engine/runner/qkv_pipeline.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/fixture_util.h"

namespace mcserve::engine {
namespace {

using mcserve::testing::FixtureDir;

struct Case {
  std::string fixture;
  bool fuses;  // whether DeltaDecode takes this model's layers
};

constexpr int kDecodeSteps = 12;

// Logits of a 9-token prompt's last token, then of kDecodeSteps decode steps (each feeding a fixed
// token pattern), on slot 1 of a fresh 2-slot pool.
std::vector<float> PromptThenDecode(const Model& model) {
  auto pool = model.NewStatePool(2);
  EXPECT_TRUE(pool.ok()) << pool.status();
  const int32_t vocab = static_cast<int32_t>(model.config().vocab_size);
  std::vector<int32_t> tokens;
  for (int32_t i = 0; i < 9; ++i) tokens.push_back((5 * i + 2) % vocab);
  std::vector<float> all;
  for (int step = 0; step <= kDecodeSteps; ++step) {
    if (step > 0) tokens.assign(1, (11 * step + 7) % vocab);
    const SequenceChunk chunk{.slot = 1, .tokens = tokens};
    auto logits = model.Forward({&chunk, 1}, *pool);
    EXPECT_TRUE(logits.ok()) << logits.status();
    if (!logits.ok()) return {};
    const std::vector<float> host = *logits->ToHostF32();
    all.insert(all.end(), host.begin(), host.end());
  }
  return all;
}

class FusedDecodeTest : public ::testing::TestWithParam<Case> {};

TEST_P(FusedDecodeTest, EqualsTheOpsOneByOneBitForBit) {
  const Case& c = GetParam();
  auto model = Model::Load(FixtureDir(c.fixture), {.num_threads = 2});
  ASSERT_TRUE(model.ok()) << model.status();
  const uint64_t before = FusedDecodeStepsForTesting();
  const std::vector<float> fused = PromptThenDecode(**model);
  const uint64_t fused_steps = FusedDecodeStepsForTesting() - before;
  SetDecodeFusionOffForTesting(true);
  const std::vector<float> op_by_op = PromptThenDecode(**model);
  const uint64_t steps_while_off = FusedDecodeStepsForTesting() - before - fused_steps;
  SetDecodeFusionOffForTesting(false);

  EXPECT_EQ(fused_steps, c.fuses ? static_cast<uint64_t>(kDecodeSteps * (*model)->config().num_hidden_layers) : 0u);
  EXPECT_EQ(steps_while_off, 0u);
  ASSERT_EQ(fused.size(), op_by_op.size());
  ASSERT_FALSE(fused.empty());
  for (size_t i = 0; i < fused.size(); ++i) {
    ASSERT_EQ(std::memcmp(&fused[i], &op_by_op[i], sizeof(float)), 0)
        << "logit " << i << ": " << fused[i] << " fused, " << op_by_op[i] << " op by op";
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, FusedDecodeTest,
                         ::testing::Values(Case{"gated_deltanet", true}, Case{"delta_net", true},
                                           Case{"gated_deltanet_gva_bf16", false},  // q heads ≠ v heads
                                           Case{"gated_deltanet_mc_uproj", false},  // Memory Caching on
                                           Case{"gla", false}),
                         [](const auto& info) { return info.param.fixture; });

}  // namespace
}  // namespace mcserve::engine
