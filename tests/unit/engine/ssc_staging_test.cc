// Sparse Selective Caching with a device tier too small for the checkpoints: the pages live on the
// host tier, the router's choices are staged into the device hot sets, and the logits equal those of
// the all-resident run — on the CPU backend and on the emulated CUDA device, for prefill chunks and
// one-token decode, with hot sets large and tiny (a tiny hot set splits a prefill chunk into rounds).
#include <ostream>
#include <map>
#include <string>
#include <vector>

#include "engine/runner/model.h"
#include "fixture_util.h"
#include "gtest/gtest.h"

namespace mcserve::engine {
namespace {

using kernels::Device;
using testing::FixtureDir;

// FP32 summation-order differences only (a few ulps through the network).
constexpr double kTolerance = 1e-6;

struct Case {
  std::string fixture;
  std::string segmentation;
  Device device;
  std::string name;
};

std::vector<Case> Cases() {
  std::vector<Case> cases;
  for (const char* f : {"gated_deltanet", "linear_attn_identity", "titans", "titans_mlp", "dla"}) {
    for (const char* seg : {"constant", "logarithmic"}) {
      for (Device d : {Device::kCpu, Device::kCudaEmu}) {
        cases.push_back({f, seg, d, std::string(f) + "_" + seg + (d == Device::kCpu ? "_cpu" : "_cuda_emu")});
      }
    }
  }
  return cases;
}

struct PromptRun {
  std::vector<float> logits;  // every prompt position's logits, concatenated
  CheckpointStoreStats stats;
};

PromptRun PromptLogits(const Model& model, const std::vector<int32_t>& prompt, int chunk,
                 const CheckpointStoreOptions& options) {
  PromptRun run;
  auto pool = model.NewStatePool(2, options);
  EXPECT_TRUE(pool.ok()) << pool.status();
  if (!pool.ok()) return run;
  const int slot = 1;  // not the first slot, so slot indexing is exercised
  for (size_t b = 0; b < prompt.size(); b += chunk) {
    SequenceChunk c{.slot = slot, .tokens = {prompt.data() + b, std::min<size_t>(chunk, prompt.size() - b)},
                    .all_logits = true};
    auto logits = model.Forward({&c, 1}, *pool);
    EXPECT_TRUE(logits.ok()) << logits.status();
    if (!logits.ok()) return run;
    auto host = logits->ToHostF32();
    run.logits.insert(run.logits.end(), host->begin(), host->end());
  }
  run.stats = pool->checkpoints().stats();
  return run;
}

// A failing case names its case (not its bytes).
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class SscStagingTest : public ::testing::TestWithParam<Case> {};

TEST_P(SscStagingTest, HostTierWithStagingMatchesAllResident) {
  const Case& c = GetParam();
  const std::map<std::string, std::string> mc = {
      {"aggregation", "ssc"}, {"segmentation", c.segmentation}, {"segment_size", "4"}, {"top_k", "2"}};
  auto model = Model::Load(FixtureDir(c.fixture), {.device = c.device, .num_threads = 1, .mc_overrides = mc});
  ASSERT_TRUE(model.ok()) << model.status();
  const std::vector<int32_t> prompt = testing::LoadGolden(c.fixture).prompt_ids;
  ASSERT_GE(prompt.size(), 16u);  // enough closed segments for top-2 to drop some

  for (int chunk : {7, 1}) {
    SCOPED_TRACE(::testing::Message() << "chunk " << chunk);
    const PromptRun resident = PromptLogits(**model, prompt, chunk, {});
    EXPECT_EQ(resident.stats.host_pages, 0);
    EXPECT_EQ(resident.stats.stagings, 0);
    for (int hot_pages : {64, 1}) {
      SCOPED_TRACE(::testing::Message() << "hot_pages " << hot_pages);
      const PromptRun staged = PromptLogits(**model, prompt, chunk, {.device_bytes = 0, .hot_pages = hot_pages});
      EXPECT_GT(staged.stats.host_pages, 0);
      EXPECT_EQ(staged.stats.device_pages, 0);
      EXPECT_GT(staged.stats.stagings, 0);
      // The same pages are kept, in the same order, so the read-out is the same up to summation
      // order: measured bit-identical except on the CPU when a tiny hot set splits a prefill chunk
      // into rounds (fewer readers per page, so the loop replaces sgemm): 3.7e-7.
      EXPECT_LE(testing::RelativeError(staged.logits, resident.logits), kTolerance);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, SscStagingTest, ::testing::ValuesIn(Cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace mcserve::engine
