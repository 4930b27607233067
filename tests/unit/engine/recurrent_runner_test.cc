// RecurrentRunner on the fixtures: a request resumed from a cached prompt prefix gives exactly the
// logits of an uninterrupted run, for models without MC (HOPE with an adaptive CMS too) and for MC in both init modes, every
// aggregation and both segmentations, on the CPU and on the emulated GPU (with SSC pages on the host
// tier); the store and cache stay consistent, pages are released when requests end, and a store
// without room refuses a new sequence.
#include "engine/serving/recurrent_runner.h"

#include <ostream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "fixture_util.h"
#include "gtest/gtest.h"

namespace mcserve::engine {
namespace {

using kernels::Device;
using testing::FixtureDir;

constexpr int64_t kBlock = 8;

struct Case {
  std::string fixture;
  std::map<std::string, std::string> mc;
  Device device = Device::kCpu;
  CheckpointStoreOptions store;
  std::string name;
};

std::vector<Case> Cases() {
  std::vector<Case> cases;
  cases.push_back({"gated_deltanet", {{"aggregation", "none"}}, Device::kCpu, {}, "gdn_no_mc"});
  cases.push_back({"gla", {}, Device::kCpu, {}, "gla_no_mc"});
  cases.push_back({"swla", {}, Device::kCpu, {}, "swla_no_mc"});
  for (const char* agg : {"grm", "ssc", "residual", "mean"}) {
    for (const char* init : {"independent", "checkpoint"}) {
      cases.push_back({"gated_deltanet",
                       {{"aggregation", agg}, {"segment_size", "4"}, {"init_mode", init}},
                       Device::kCpu,
                       {},
                       std::string("gdn_") + agg + "_" + init});
    }
  }
  cases.push_back({"titans", {{"aggregation", "grm"}, {"segmentation", "logarithmic"}}, Device::kCpu, {},
                   "titans_grm_logarithmic"});
  cases.push_back({"linear_attn_identity", {{"aggregation", "ssc"}, {"segment_size", "4"}, {"top_k", "1"}},
                   Device::kCudaEmu, {.device_bytes = 0, .hot_pages = 2}, "la_ssc_host_tier_cuda_emu"});
  cases.push_back({"gated_deltanet", {{"aggregation", "grm"}, {"segment_size", "4"}}, Device::kCudaEmu, {},
                   "gdn_grm_cuda_emu"});
  // The MLP memories: inner chunks of 4 (dla) and momentum (titans_mlp) resume mid-segment too.
  cases.push_back({"dla", {}, Device::kCpu, {}, "dla_no_mc"});
  for (const char* agg : {"grm", "soup", "ssc", "residual", "mean"}) {
    for (const char* init : {"independent", "checkpoint"}) {
      cases.push_back({"titans_mlp", {{"aggregation", agg}, {"segment_size", "4"}, {"init_mode", init}}, Device::kCpu,
                       {}, std::string("titans_mlp_") + agg + "_" + init});
    }
  }
  // Segments of 2 cut dla's inner chunks of 4 (prefix blocks stay multiples of 8).
  cases.push_back({"dla", {{"aggregation", "soup"}, {"segment_size", "2"}}, Device::kCpu, {}, "dla_soup_c2"});
  for (const char* init : {"independent", "checkpoint"}) {
    cases.push_back({"dla", {{"aggregation", "grm"}, {"segmentation", "logarithmic"}, {"init_mode", init}},
                     Device::kCpu, {}, std::string("dla_grm_logarithmic_") + init});
  }
  cases.push_back({"dla", {{"aggregation", "ssc"}, {"segment_size", "4"}, {"top_k", "1"}}, Device::kCudaEmu,
                   {.device_bytes = 0, .hot_pages = 2}, "dla_ssc_host_tier_cuda_emu"});
  // Lattice: the slots restart at S_0 (not zero) at the sequence start and at independent segments.
  cases.push_back({"lattice", {}, Device::kCpu, {}, "lattice_no_mc"});
  for (const char* init : {"independent", "checkpoint"}) {
    cases.push_back({"lattice", {{"aggregation", "grm"}, {"segment_size", "4"}, {"init_mode", init}}, Device::kCpu,
                     {}, std::string("lattice_grm_") + init});
  }
  cases.push_back({"lattice", {{"aggregation", "grm"}, {"segmentation", "logarithmic"}}, Device::kCudaEmu, {},
                   "lattice_grm_logarithmic_cuda_emu"});
  // ... and ENC, whose write coefficient reads the slots (c_i = φ_iᵀv − k_i).
  cases.push_back({"lattice_enc", {}, Device::kCpu, {}, "lattice_enc_no_mc"});
  cases.push_back({"lattice_enc", {{"aggregation", "residual"}, {"segment_size", "4"}, {"init_mode", "independent"}},
                   Device::kCpu, {}, "lattice_enc_residual_independent"});
  cases.push_back({"lattice_enc", {{"aggregation", "grm"}, {"segment_size", "4"}, {"init_mode", "checkpoint"}},
                   Device::kCudaEmu, {}, "lattice_enc_grm_checkpoint_cuda_emu"});
  // HOPE with an adaptive CMS: Δθ, G and the saved last token resume with the prefix.
  cases.push_back({"hope_adaptive", {}, Device::kCpu, {}, "hope_adaptive"});
  cases.push_back({"hope_adaptive", {}, Device::kCudaEmu, {}, "hope_adaptive_cuda_emu"});
  return cases;
}

// Begins `prompt` on the runner's lowest free slot, which must be `slot`; the cached prompt tokens.
absl::StatusOr<int64_t> BeginAt(RecurrentRunner& runner, int slot, std::span<const int32_t> prompt) {
  auto begun = runner.Begin(prompt);
  if (!begun.ok()) return begun.status();
  EXPECT_EQ(begun->slot, slot);
  return begun->cached_tokens;
}

// Runs `prompt` from position `from` in chunks ending on block boundaries, then `decode` greedy
// tokens; returns every step's logits concatenated.
std::vector<float> RunFrom(RecurrentRunner& runner, int slot, const std::vector<int32_t>& prompt, int64_t from,
                           int decode) {
  std::vector<float> all;
  auto step = [&](std::span<const int32_t> tokens) -> std::vector<float> {
    const SequenceChunk seq{.slot = slot, .tokens = tokens};
    auto logits = runner.Step({&seq, 1});
    EXPECT_TRUE(logits.ok()) << logits.status();
    if (!logits.ok()) return {};
    all.insert(all.end(), logits->logits.begin(), logits->logits.end());
    return logits->logits;
  };
  std::vector<float> last;
  for (int64_t b = from; b < static_cast<int64_t>(prompt.size());) {
    const int64_t end = std::min<int64_t>((b / kBlock + 1) * kBlock, prompt.size());
    last = step(std::span(prompt).subspan(b, end - b));
    b = end;
  }
  for (int i = 0; i < decode && !last.empty(); ++i) {
    const int32_t next = static_cast<int32_t>(std::max_element(last.begin(), last.end()) - last.begin());
    last = step({&next, 1});
  }
  return all;
}

// A failing case names its case (not its bytes).
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class PrefixReuseTest : public ::testing::TestWithParam<Case> {};

TEST_P(PrefixReuseTest, ResumedFromACachedPrefixEqualsUninterrupted) {
  const Case& c = GetParam();
  auto model = Model::Load(FixtureDir(c.fixture), {.device = c.device, .num_threads = 1, .mc_overrides = c.mc});
  ASSERT_TRUE(model.ok()) << model.status();
  auto runner = RecurrentRunner::Create(
      model->get(), {.num_slots = 3, .checkpoints = c.store, .prefix_block = kBlock, .prefix_cache_bytes = -1});
  ASSERT_TRUE(runner.ok()) << runner.status();
  RecurrentRunner& r = **runner;
  EXPECT_EQ(r.boundary_tokens(), kBlock);
  const std::vector<int32_t> prompt = testing::LoadGolden(c.fixture).prompt_ids;  // 35 tokens

  // First request: a miss; it caches its prompt's blocks.
  auto cached = BeginAt(r, 0, prompt);
  ASSERT_TRUE(cached.ok()) << cached.status();
  EXPECT_EQ(*cached, 0);
  const std::vector<float> uninterrupted = RunFrom(r, 0, prompt, 0, 6);
  ASSERT_TRUE(r.SanityCheck().ok()) << r.SanityCheck();

  // Second request with the same prompt, while the first still runs: resumes at 32 = 4 blocks.
  cached = BeginAt(r, 1, prompt);
  ASSERT_TRUE(cached.ok()) << cached.status();
  EXPECT_EQ(*cached, 32);
  const std::vector<float> resumed = RunFrom(r, 1, prompt, *cached, 6);
  // Logits of the steps after the cached prefix must be those of the uninterrupted run.
  const size_t vocab = r.vocab_size(), skipped_steps = 4;
  ASSERT_EQ(resumed.size() + skipped_steps * vocab, uninterrupted.size());
  EXPECT_TRUE(std::equal(resumed.begin(), resumed.end(), uninterrupted.begin() + skipped_steps * vocab));

  // A prompt sharing only the first two blocks resumes at 16.
  std::vector<int32_t> other(prompt.begin(), prompt.begin() + 20);
  other[18] = (other[18] + 1) % static_cast<int32_t>(vocab);
  cached = BeginAt(r, 2, other);
  ASSERT_TRUE(cached.ok()) << cached.status();
  EXPECT_EQ(*cached, 16);
  EXPECT_EQ(r.stats().prefix_hits, 2);
  EXPECT_EQ(r.stats().prefix_misses, 1);
  EXPECT_EQ(r.stats().prefix_cached_tokens, 48);

  // Everything ends: no page is referenced by a sequence any more; the cache keeps its entries.
  for (int slot = 0; slot < 3; ++slot) r.End(slot);
  EXPECT_EQ(r.stats().referenced_pages, 0);
  ASSERT_TRUE(r.SanityCheck().ok()) << r.SanityCheck();
  if (c.store.device_bytes == 0) EXPECT_GT(r.stats().stagings, 0);
}

INSTANTIATE_TEST_SUITE_P(Models, PrefixReuseTest, ::testing::ValuesIn(Cases()),
                         [](const auto& info) { return info.param.name; });

TEST(RecurrentRunnerTest, AWholePromptInOneStepIsStillCachedAtEveryBlock) {
  const std::map<std::string, std::string> mc = {{"aggregation", "ssc"}, {"segment_size", "4"}};
  auto model = Model::Load(FixtureDir("gated_deltanet"), {.num_threads = 1, .mc_overrides = mc});
  ASSERT_TRUE(model.ok());
  auto runner = RecurrentRunner::Create(model->get(), {.num_slots = 2, .prefix_block = kBlock});
  ASSERT_TRUE(runner.ok());
  RecurrentRunner& r = **runner;
  const std::vector<int32_t> prompt = testing::LoadGolden("gated_deltanet").prompt_ids;
  ASSERT_TRUE(BeginAt(r, 0, prompt).ok());
  auto whole = r.Step(std::vector<SequenceChunk>{{.slot = 0, .tokens = prompt}});
  ASSERT_TRUE(whole.ok()) << whole.status();
  auto cached = BeginAt(r, 1, prompt);
  ASSERT_TRUE(cached.ok());
  EXPECT_EQ(*cached, 32);
  const std::span<const int32_t> tail = std::span(prompt).subspan(32);
  auto resumed = r.Step(std::vector<SequenceChunk>{{.slot = 1, .tokens = tail}});
  ASSERT_TRUE(resumed.ok());
  EXPECT_EQ(resumed->logits, whole->logits);
  ASSERT_TRUE(r.SanityCheck().ok()) << r.SanityCheck();
}

// prompt_logprobs: a chunk with all_logits scores tokens 1..n−1, also when the runner splits it into
// passes at its snapshot boundaries (block 8), equal to one unsplit pass (prefix caching off) up to
// float rounding.
TEST(RecurrentRunnerTest, PromptLogprobsOfASplitChunkEqualOneUnsplitPass) {
  auto model = Model::Load(FixtureDir("gated_deltanet"), {.num_threads = 1});
  ASSERT_TRUE(model.ok());
  auto on = RecurrentRunner::Create(model->get(), {.num_slots = 1, .prefix_block = kBlock});
  auto off = RecurrentRunner::Create(model->get(), {.num_slots = 1, .prefix_caching = false});
  ASSERT_TRUE(on.ok() && off.ok());
  const std::vector<int32_t> prompt = testing::LoadGolden("gated_deltanet").prompt_ids;
  ASSERT_TRUE(BeginAt(**on, 0, prompt).ok());
  ASSERT_TRUE(BeginAt(**off, 0, prompt).ok());
  const SequenceChunk chunk{.slot = 0, .tokens = prompt, .all_logits = true};
  auto split = (*on)->Step({&chunk, 1});
  auto whole = (*off)->Step({&chunk, 1});
  ASSERT_TRUE(split.ok() && whole.ok());
  ASSERT_EQ(split->prompt_logprobs.size(), 1u);
  ASSERT_EQ(split->prompt_logprobs[0].size(), prompt.size() - 1);
  ASSERT_EQ(whole->prompt_logprobs[0].size(), prompt.size() - 1);
  for (size_t i = 0; i + 1 < prompt.size(); ++i) {
    // Split passes sum the recurrence in another order: float rounding only.
    EXPECT_NEAR(split->prompt_logprobs[0][i], whole->prompt_logprobs[0][i], 1e-4) << i;
    EXPECT_LT(whole->prompt_logprobs[0][i], 0.0f);
  }
  ASSERT_EQ(split->logits.size(), whole->logits.size());
  for (size_t v = 0; v < whole->logits.size(); ++v) EXPECT_NEAR(split->logits[v], whole->logits[v], 1e-4) << v;
}

TEST(RecurrentRunnerTest, PrefixCachingOffNeverHitsAndSameLogits) {
  const std::map<std::string, std::string> mc = {{"aggregation", "grm"}, {"segment_size", "4"}};
  auto model = Model::Load(FixtureDir("gated_deltanet"), {.num_threads = 1, .mc_overrides = mc});
  ASSERT_TRUE(model.ok());
  auto on = RecurrentRunner::Create(model->get(), {.num_slots = 1, .prefix_block = kBlock});
  auto off = RecurrentRunner::Create(model->get(), {.num_slots = 1, .prefix_caching = false});
  ASSERT_TRUE(on.ok() && off.ok());
  EXPECT_EQ((*off)->boundary_tokens(), 0);
  const std::vector<int32_t> prompt = testing::LoadGolden("gated_deltanet").prompt_ids;
  ASSERT_TRUE(BeginAt(**on, 0, prompt).ok());
  ASSERT_TRUE(BeginAt(**off, 0, prompt).ok());
  EXPECT_EQ(RunFrom(**on, 0, prompt, 0, 4), RunFrom(**off, 0, prompt, 0, 4));
  (*off)->End(0);
  auto again = BeginAt(**off, 0, prompt);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, 0);
  EXPECT_EQ((*off)->stats().prefix_hits + (*off)->stats().prefix_misses, 0);
}

TEST(RecurrentRunnerTest, ASmallCacheEvictsButNeverWhatARunningSequenceExtends) {
  const std::map<std::string, std::string> mc = {{"aggregation", "grm"}, {"segment_size", "4"}};
  auto model = Model::Load(FixtureDir("gated_deltanet"), {.num_threads = 1, .mc_overrides = mc});
  ASSERT_TRUE(model.ok());
  // Room for about two snapshots.
  auto probe = (*model)->NewStatePool(1);
  ASSERT_TRUE(probe.ok());
  const int64_t snapshot = probe->bytes_per_slot();
  auto runner = RecurrentRunner::Create(
      model->get(), {.num_slots = 2, .prefix_block = kBlock, .prefix_cache_bytes = 2 * snapshot + snapshot / 2});
  ASSERT_TRUE(runner.ok());
  RecurrentRunner& r = **runner;
  const std::vector<int32_t> prompt = testing::LoadGolden("gated_deltanet").prompt_ids;
  for (int round = 0; round < 3; ++round) {
    std::vector<int32_t> p = prompt;
    p[0] = (p[0] + round) % r.vocab_size();  // different first block: a separate chain each round
    ASSERT_TRUE(BeginAt(r, 0, p).ok());
    RunFrom(r, 0, p, 0, 1);
    ASSERT_TRUE(r.SanityCheck().ok()) << r.SanityCheck();
    r.End(0);
  }
  EXPECT_GT(r.stats().evictions, 0);
  ASSERT_TRUE(r.SanityCheck().ok()) << r.SanityCheck();
  EXPECT_EQ(r.stats().referenced_pages, 0);
}

TEST(RecurrentRunnerTest, AStoreWithoutRoomRefusesANewSequence) {
  const std::map<std::string, std::string> mc = {{"aggregation", "grm"}, {"segment_size", "4"}};
  auto model = Model::Load(FixtureDir("gated_deltanet"), {.num_threads = 1, .mc_overrides = mc});
  ASSERT_TRUE(model.ok());
  // Budgets below one segment's pages: no sequence could ever run.
  auto never = RecurrentRunner::Create(model->get(),
                                       {.num_slots = 2, .checkpoints = {.device_bytes = 0, .host_bytes = 16}});
  ASSERT_TRUE(never.ok());
  const std::vector<int32_t> prompt = {1, 2, 3};
  auto begun = BeginAt(**never, 0, prompt);
  EXPECT_EQ(begun.status().code(), absl::StatusCode::kFailedPrecondition) << begun.status();
  EXPECT_TRUE(absl::StrContains(begun.status().message(), "no sequence can run")) << begun.status();
  // Room for one sequence's next segment: the first begins, the second must wait.
  auto probe = (*model)->NewStatePool(1);
  ASSERT_TRUE(probe.ok());
  const int64_t page_bytes =  // one segment's pages: every layer caches
      (*model)->config().num_hidden_layers * probe->layer(0).at("memory").nbytes();
  auto runner = RecurrentRunner::Create(
      model->get(), {.num_slots = 2, .checkpoints = {.device_bytes = 0, .host_bytes = page_bytes + page_bytes / 2},
                     .prefix_caching = false});
  ASSERT_TRUE(runner.ok());
  ASSERT_TRUE(BeginAt(**runner, 0, std::vector<int32_t>{1, 2, 3, 4, 5}).ok());
  ASSERT_TRUE((*runner)->Step(std::vector<SequenceChunk>{{.slot = 0, .tokens = std::vector<int32_t>{1, 2, 3, 4, 5}}}).ok());
  begun = BeginAt(**runner, 1, prompt);
  EXPECT_EQ(begun.status().code(), absl::StatusCode::kResourceExhausted) << begun.status();
  EXPECT_TRUE(absl::StrContains(begun.status().message(), "no room for another sequence")) << begun.status();
  // The refused slot stays free.
  EXPECT_EQ((*runner)->Step(std::vector<SequenceChunk>{{.slot = 1, .tokens = prompt}}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mcserve::engine
