// Memory Caching invariants on every family (spec B.12): with nothing cached MC is bit-identical
// to the base model; chunked prefill across segment boundaries equals token-by-token decode; a
// batch equals each request alone; SSC with k ≥ the cached count is exactly GRM.
#include <map>

#include "engine/runner/model.h"
#include "fixture_util.h"
#include "gtest/gtest.h"

namespace mcserve::engine {
namespace {

using Overrides = std::map<std::string, std::string>;
using testing::FixtureDir;
using testing::FixtureNames;
using testing::RelativeError;

// Fixtures whose linear attention is normalised (MC does not support them).
bool Normalised(const std::string& name) {
  auto c = LoadModelConfig(FixtureDir(name));
  return c.ok() && c->family == ModelFamily::kLinearAttn && c->norm_feature_map;
}

// hope: Memory Caching of M_mem (soup is its own aggregation; soup with logarithmic segments in
// independent init mode is refused).
bool Hope(const std::string& name) {
  auto c = LoadModelConfig(FixtureDir(name));
  return c.ok() && c->family == ModelFamily::kHope;
}

// Whether `name` is hope with an adaptive CMS (Memory Caching is not defined there).
bool AdaptiveCms(const std::string& name) {
  auto c = LoadModelConfig(FixtureDir(name));
  return c.ok() && c->family == ModelFamily::kHope && c->hope.AdaptiveCms();
}

// gam (no recurrent memory) and armt (a memory written once per segment): Memory Caching does not apply.
bool Gam(const std::string& name) {
  auto c = LoadModelConfig(FixtureDir(name));
  return c.ok() && (c->family == ModelFamily::kGam || c->family == ModelFamily::kArmt);
}

// The MLP memories (dla, titans memory_depth 2): soup is an aggregation of its own on them (it is
// GRM on matrix memories).
bool DeepMemory(const std::string& name) {
  auto c = LoadModelConfig(FixtureDir(name));
  return c.ok() && c->deep_memory();
}

std::vector<std::string> Aggregations(const std::string& name) {
  std::vector<std::string> a = {"residual", "grm", "ssc", "mean"};
  if (DeepMemory(name) || Hope(name)) a.push_back("soup");
  return a;
}

std::unique_ptr<Model> LoadWith(const std::string& name, const Overrides& overrides) {
  auto m = Model::Load(FixtureDir(name), {.num_threads = 2, .mc_overrides = overrides});
  EXPECT_TRUE(m.ok()) << name << ": " << m.status();
  return m.ok() ? std::move(*m) : nullptr;
}

// Logits of every token of `prompts` (one sequence per slot, run together), in chunks of `chunk`.
std::vector<std::vector<float>> RunBatch(const Model& model, const std::vector<std::vector<int32_t>>& prompts,
                                         int chunk) {
  auto pool = model.NewStatePool(static_cast<int>(prompts.size()) + 1);
  EXPECT_TRUE(pool.ok());
  std::vector<std::vector<float>> out(prompts.size());
  for (size_t begin = 0;; begin += chunk) {
    std::vector<SequenceChunk> chunks;
    std::vector<size_t> owners;
    for (size_t i = 0; i < prompts.size(); ++i) {
      if (begin >= prompts[i].size()) continue;
      const size_t n = std::min<size_t>(chunk, prompts[i].size() - begin);
      // Slots in reverse order, so slot and batch position differ.
      chunks.push_back({.slot = static_cast<int>(prompts.size() - i), .tokens = {prompts[i].data() + begin, n},
                        .all_logits = true});
      owners.push_back(i);
    }
    if (chunks.empty()) break;
    auto logits = model.Forward(chunks, *pool);
    EXPECT_TRUE(logits.ok()) << logits.status();
    if (!logits.ok()) break;
    const std::vector<float> host = *logits->ToHostF32();
    const int64_t v = model.config().vocab_size;
    size_t row = 0;
    for (size_t c = 0; c < chunks.size(); ++c) {
      std::vector<float>& dst = out[owners[c]];
      dst.insert(dst.end(), host.begin() + row * v, host.begin() + (row + chunks[c].tokens.size()) * v);
      row += chunks[c].tokens.size();
    }
  }
  return out;
}

std::vector<int32_t> Prompt(const std::string& name) { return testing::LoadGolden(name).prompt_ids; }

class McInvariantsTest : public ::testing::TestWithParam<std::string> {};

// Fixtures MC runs on: every one but normalised linear attention, gam (no recurrent memory) and hope with
// an adaptive CMS (MC not defined).
std::vector<std::string> CachingFixtures() {
  std::vector<std::string> names;
  for (const std::string& n : FixtureNames()) {
    if (!Normalised(n) && !Gam(n) && !AdaptiveCms(n)) names.push_back(n);
  }
  return names;
}

// Whether hope refuses this combination at load (soup, logarithmic segments, independent init mode).
bool Refused(const std::string& name, const std::string& aggregation, const std::string& seg,
             const std::string& init) {
  return Hope(name) && aggregation == "soup" && seg == "logarithmic" && init == "independent";
}

// hope_anchor_momentum (β = 0.5 momentum, E = d) diverges to non-finite logits under logarithmic MC —
// the reference model does too (tests/reference: HopeLM with that memory_caching) — so its logits cannot
// be compared there.
bool Diverges(const std::string& name, const std::string& seg) {
  return name == "hope_anchor_momentum" && seg == "logarithmic";
}

TEST(McInvariants, HopeRefusesSoupWithIndependentLogarithmicSegmentsNamingIt) {
  int rejected = 0;
  for (const std::string& name : FixtureNames()) {
    if (!Hope(name) || AdaptiveCms(name)) continue;
    auto m = Model::Load(FixtureDir(name), {.mc_overrides = {{"aggregation", "soup"},
                                                              {"segmentation", "logarithmic"},
                                                              {"init_mode", "independent"}}});
    ASSERT_FALSE(m.ok()) << name;
    EXPECT_EQ(m.status().code(), absl::StatusCode::kUnimplemented);
    for (const char* word : {"hope", "soup", "logarithmic", "independent", "layer 0"}) {
      EXPECT_NE(m.status().message().find(word), std::string::npos) << m.status();
    }
    ++rejected;
  }
  EXPECT_GE(rejected, 1);
}

TEST(McInvariants, HopeWithAnAdaptiveCmsRefusesMemoryCachingNamingBoth) {
  int rejected = 0;
  for (const std::string& name : FixtureNames()) {
    if (!AdaptiveCms(name)) continue;
    auto m = Model::Load(FixtureDir(name), {.mc_overrides = {{"aggregation", "grm"}}});
    ASSERT_FALSE(m.ok()) << name;
    EXPECT_EQ(m.status().code(), absl::StatusCode::kUnimplemented);
    for (const char* word : {"hope", "Memory Caching", "cms_adaptive"}) {
      EXPECT_NE(m.status().message().find(word), std::string::npos) << m.status();
    }
    ++rejected;
  }
  EXPECT_GE(rejected, 3);
}

TEST(McInvariants, GamIsRejectedNamingTheFamily) {
  int rejected = 0;
  for (const std::string& name : FixtureNames()) {
    if (!Gam(name)) continue;
    auto m = Model::Load(FixtureDir(name), {.mc_overrides = {{"aggregation", "ssc"}}});
    ASSERT_FALSE(m.ok()) << name;
    EXPECT_EQ(m.status().code(), absl::StatusCode::kUnimplemented);
    EXPECT_NE(m.status().message().find(LoadModelConfig(FixtureDir(name))->model_type), std::string::npos)
        << m.status();
    ++rejected;
  }
  EXPECT_GE(rejected, 1);
}

TEST(McInvariants, NormalisedLinearAttentionIsRejectedNamingTheLayer) {
  int rejected = 0;
  for (const std::string& name : FixtureNames()) {
    if (!Normalised(name)) continue;
    auto m = Model::Load(FixtureDir(name), {.mc_overrides = {{"aggregation", "grm"}}});
    ASSERT_FALSE(m.ok()) << name;
    EXPECT_EQ(m.status().code(), absl::StatusCode::kUnimplemented);
    EXPECT_NE(m.status().message().find("layer 0"), std::string::npos) << m.status();
    ++rejected;
  }
  EXPECT_GE(rejected, 1);
}

TEST_P(McInvariantsTest, NothingCachedIsBitIdenticalToTheBaseModel) {
  const std::vector<int32_t> prompt = Prompt(GetParam());
  auto base = LoadWith(GetParam(), {{"aggregation", "none"}});
  ASSERT_NE(base, nullptr);
  const std::vector<float> expected = RunBatch(*base, {prompt}, 64)[0];
  for (const std::string& aggregation : Aggregations(GetParam())) {
    for (const char* init : {"independent", "checkpoint"}) {
      auto mc = LoadWith(GetParam(), {{"aggregation", aggregation}, {"init_mode", init}, {"segment_size", "64"}});
      ASSERT_NE(mc, nullptr);
      EXPECT_EQ(RunBatch(*mc, {prompt}, 64)[0], expected) << aggregation << " " << init;
    }
  }
}

TEST_P(McInvariantsTest, PrefillEqualsDecodeAndBatchEqualsAlone) {
  const std::vector<int32_t> p = Prompt(GetParam());
  const std::vector<std::vector<int32_t>> prompts = {p, {p.begin() + 3, p.begin() + 20}, {p.begin(), p.begin() + 9}};
  for (const std::string seg : {"constant", "logarithmic"}) {
    for (const std::string& aggregation : Aggregations(GetParam())) {
      if (seg == "logarithmic" && aggregation == "mean") continue;  // config error
      for (const char* init : {"independent", "checkpoint"}) {
        if (Refused(GetParam(), aggregation, seg, init) || Diverges(GetParam(), seg)) continue;
        Overrides o = {{"aggregation", aggregation}, {"init_mode", init}, {"segmentation", seg},
                       {"segment_size", "4"}};
        auto model = LoadWith(GetParam(), o);
        ASSERT_NE(model, nullptr);
        const std::string what = seg + " " + aggregation + " " + init;
        const std::vector<float> decode = RunBatch(*model, {p}, 1)[0];
        for (int chunk : {3, 4, 64}) {
          EXPECT_LE(RelativeError(RunBatch(*model, {p}, chunk)[0], decode), 1e-5) << what << " chunk " << chunk;
        }
        const auto batched = RunBatch(*model, prompts, 5);
        for (size_t i = 0; i < prompts.size(); ++i) {
          EXPECT_LE(RelativeError(batched[i], RunBatch(*model, {prompts[i]}, 5)[0]), 1e-5) << what << " request " << i;
        }
      }
    }
  }
}

TEST_P(McInvariantsTest, SscWithKAtLeastTheCachedCountIsGrm) {
  const std::vector<int32_t> prompt = Prompt(GetParam());
  for (const std::string seg : {"constant", "logarithmic"}) {
    if (Diverges(GetParam(), seg)) continue;
    auto grm = LoadWith(GetParam(), {{"aggregation", "grm"}, {"segmentation", seg}, {"segment_size", "4"}});
    auto ssc = LoadWith(GetParam(),
                        {{"aggregation", "ssc"}, {"top_k", "64"}, {"segmentation", seg}, {"segment_size", "4"}});
    ASSERT_NE(grm, nullptr);
    ASSERT_NE(ssc, nullptr);
    EXPECT_EQ(RunBatch(*ssc, {prompt}, 7)[0], RunBatch(*grm, {prompt}, 7)[0]) << seg;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, McInvariantsTest, ::testing::ValuesIn(CachingFixtures()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace mcserve::engine
