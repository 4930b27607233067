// The whole model on the emulated CUDA device (the CUDA kernel sources run by the CPU emulator)
// against the CPU backend: every fixture, with and without Memory Caching, FP32 everywhere. With
// MCSERVE_TEST_DEVICE=cuda (CTest's model_emu_parity_test_gpu) the same on a real GPU, skipped
// without one (tests/unit/kernels/emu_test_device.h).
#include <ostream>

#include "engine/runner/model.h"
#include "fixture_util.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/segmented_forward.h"
#include "tests/unit/kernels/emu_test_device.h"

namespace mcserve::engine {
namespace {

using testing::FixtureDir;
using testing::RelativeError;

// Different reduction orders on the two backends; FP32 throughout.
constexpr double kTolerance = 1e-4;

struct Case {
  std::string fixture;
  std::map<std::string, std::string> mc;  // empty: the model as configured
  std::string name;
};

std::vector<Case> Cases() {
  std::vector<Case> cases;
  for (const std::string& f : testing::FixtureNames()) cases.push_back({f, {}, f});
  for (const char* f :
       {"gated_deltanet", "linear_attn_identity", "swla", "titans", "gla", "titans_mlp", "dla", "lattice",
        "lattice_enc", "hope", "hope_anchor_momentum"}) {
    const bool hope = std::string(f).starts_with("hope");
    const bool deep = std::string(f) == "titans_mlp" || std::string(f) == "dla" || hope;
    for (const char* agg : {"residual", "grm", "ssc", "mean", "soup"}) {
      if (std::string(agg) == "soup" && !deep) continue;  // GRM's read-out on matrix memories
      for (const char* seg : {"constant", "logarithmic"}) {
        if (std::string(agg) == "mean" && std::string(seg) == "logarithmic") continue;
        // hope: soup with logarithmic segments is refused in independent init mode (the default).
        if (hope && std::string(agg) == "soup" && std::string(seg) == "logarithmic") continue;
        // hope_anchor_momentum diverges to non-finite logits under logarithmic MC (the reference too).
        if (std::string(f) == "hope_anchor_momentum" && std::string(seg) == "logarithmic") continue;
        cases.push_back({f, {{"aggregation", agg}, {"segmentation", seg}, {"segment_size", "4"}},
                         std::string(f) + "_" + agg + "_" + seg});
      }
    }
  }
  return cases;
}

std::vector<float> PromptLogits(const Model& model, const std::vector<int32_t>& prompt, int chunk) {
  auto pool = model.NewStatePool(1);
  EXPECT_TRUE(pool.ok()) << pool.status();
  std::vector<float> all;
  for (size_t b = 0; b < prompt.size(); b += chunk) {
    SequenceChunk c{.slot = 0, .tokens = {prompt.data() + b, std::min<size_t>(chunk, prompt.size() - b)},
                    .all_logits = true};
    auto logits = testing::RunSegmented(model, *pool, {&c, 1});  // armt: cut at segments, closes between
    EXPECT_TRUE(logits.ok()) << logits.status();
    if (!logits.ok()) return {};
    all.insert(all.end(), (*logits)[0].begin(), (*logits)[0].end());
  }
  return all;
}

// A failing case names its case (not its bytes).
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class ModelEmuParityTest : public ::testing::TestWithParam<Case> {};

TEST_P(ModelEmuParityTest, LogitsMatchTheCpuBackend) {
  const Case& c = GetParam();
  auto cpu = Model::Load(FixtureDir(c.fixture), {.device = kernels::Device::kCpu, .num_threads = 1, .mc_overrides = c.mc});
  auto emu = Model::Load(FixtureDir(c.fixture), {.device = kernels::DeviceUnderTest(), .mc_overrides = c.mc});
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  ASSERT_TRUE(emu.ok()) << emu.status();
  const std::vector<int32_t> prompt = testing::LoadGolden(c.fixture).prompt_ids;
  const std::vector<float> expected = PromptLogits(**cpu, prompt, 7);
  EXPECT_LE(RelativeError(PromptLogits(**emu, prompt, 7), expected), kTolerance);
  EXPECT_LE(RelativeError(PromptLogits(**emu, prompt, 1), expected), kTolerance);  // decode path
}

INSTANTIATE_TEST_SUITE_P(Models, ModelEmuParityTest, ::testing::ValuesIn(Cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace mcserve::engine
