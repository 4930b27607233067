// The fused decode step (DeltaDecode, one op for a gated-delta layer's gates, convs, norms and memory)
// against the same steps op by op: a prompt, then batch-1 decode steps on the CPU, with the fusion on
// and then off (SetDecodeFusionOffForTesting), give the same logits bit for bit; the fused path runs
// on the fixtures it takes (every layer, every decode step) and on no other. With Memory Caching on
// constant segments the fused step reads the checkpoints after DeltaDecode, and the decode steps
// close segments (a 9-token prompt, segments of 4 or 1); logarithmic segments run op by op.
#include <cstdint>
#include <cstring>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "engine/runner/model.h"
#include "engine/runner/qkv_pipeline.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/fixture_util.h"

namespace mcserve::engine {
namespace {

using mcserve::testing::FixtureDir;

constexpr int kAllLayers = -1;

struct Case {
  std::string name;     // the test's name
  std::string fixture;
  int fused_layers;     // layers DeltaDecode takes: kAllLayers, or a count
  std::map<std::string, std::string> mc = {};  // Memory Caching overrides (as mcserve-run's --mc-*)
};

// Memory Caching applied after training to the gated_deltanet fixture: `aggregation` on constant
// segments of `segment_size` (or logarithmic ones) in `init_mode`, on `layers`.
std::map<std::string, std::string> Mc(const std::string& aggregation, const std::string& init_mode,
                                      const std::string& segmentation = "constant", int segment_size = 4,
                                      const std::string& layers = "all") {
  return {{"aggregation", aggregation}, {"segmentation", segmentation},
          {"segment_size", std::to_string(segment_size)}, {"init_mode", init_mode},
          {"gate", "q"}, {"pool", "mean"}, {"top_k", "2"}, {"mean_combine", "add"}, {"layers", layers},
          {"swla_cross_boundary", init_mode == "checkpoint" ? "true" : "false"}};
}

// A failing case names itself (not its bytes).
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

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
  auto model = Model::Load(FixtureDir(c.fixture), {.num_threads = 2, .mc_overrides = c.mc});
  ASSERT_TRUE(model.ok()) << model.status();
  const uint64_t before = FusedDecodeStepsForTesting();
  const std::vector<float> fused = PromptThenDecode(**model);
  const uint64_t fused_steps = FusedDecodeStepsForTesting() - before;
  SetDecodeFusionOffForTesting(true);
  const std::vector<float> op_by_op = PromptThenDecode(**model);
  const uint64_t steps_while_off = FusedDecodeStepsForTesting() - before - fused_steps;
  SetDecodeFusionOffForTesting(false);

  const int64_t fused_layers = c.fused_layers == kAllLayers ? (*model)->config().num_hidden_layers : c.fused_layers;
  EXPECT_EQ(fused_steps, static_cast<uint64_t>(kDecodeSteps * fused_layers));
  EXPECT_EQ(steps_while_off, 0u);
  ASSERT_EQ(fused.size(), op_by_op.size());
  ASSERT_FALSE(fused.empty());
  for (size_t i = 0; i < fused.size(); ++i) {
    ASSERT_EQ(std::memcmp(&fused[i], &op_by_op[i], sizeof(float)), 0)
        << "logit " << i << ": " << fused[i] << " fused, " << op_by_op[i] << " op by op";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, FusedDecodeTest,
    ::testing::Values(Case{"gated_deltanet", "gated_deltanet", kAllLayers}, Case{"delta_net", "delta_net", kAllLayers},
                      Case{"gated_deltanet_gva_bf16", "gated_deltanet_gva_bf16", 0},  // q heads ≠ v heads
                      Case{"gla", "gla", 0},
                      // Memory Caching: GRM with the learned u_proj gate, from the fixture's own config
                      Case{"gated_deltanet_mc_uproj", "gated_deltanet_mc_uproj", kAllLayers},
                      Case{"mc_ssc_independent_c4", "gated_deltanet", kAllLayers, Mc("ssc", "independent")},
                      Case{"mc_ssc_checkpoint_c4", "gated_deltanet", kAllLayers, Mc("ssc", "checkpoint")},
                      Case{"mc_grm_independent_c1", "gated_deltanet", kAllLayers, Mc("grm", "independent", "constant", 1)},
                      Case{"mc_soup_checkpoint_c4", "gated_deltanet", kAllLayers, Mc("soup", "checkpoint")},
                      Case{"mc_residual_independent_c4", "gated_deltanet", kAllLayers, Mc("residual", "independent")},
                      Case{"mc_mean_checkpoint_c4", "gated_deltanet", kAllLayers, Mc("mean", "checkpoint")},
                      // logarithmic segments on layer 1 only: the other layers still fuse
                      Case{"mc_grm_log_layer1", "gated_deltanet", 1, Mc("grm", "independent", "logarithmic", 4, "1")}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace mcserve::engine
