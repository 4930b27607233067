// The served armt family on its fixtures (armt: S 6, M 2, γ-correction; armt_wrap: S 5, M 3,
// wrap_pos, no correction, 3 heads): the parameter count at load (the reference's formula), parity
// with the reference's golden logits of every content token for prompt lengths S−1, S, S+1 and
// 3S+17 and with its (A, z) after every close, chunk invariance (chunk sizes 1, 7, S, 3S: the same logits and state), a batch of
// different lengths equal to each alone, close chunks batched with other slots' content, and the
// refusals (a chunk past the open segment, a close of a non-full segment, Memory Caching).
#include <algorithm>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "engine/model/safetensors.h"
#include "engine/model/weights.h"
#include "engine/runner/model.h"
#include "fixture_util.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/model_test_util.h"

namespace mcserve::engine {
namespace {

using ::mcserve::testing::FixtureDir;
using ::mcserve::testing::LoadGolden;
using ::mcserve::testing::RelativeError;
using testing::HasError;

const char* const kFixtures[] = {"armt", "armt_wrap"};

std::unique_ptr<Model> LoadArmt(const std::string& name) {
  auto m = Model::Load(FixtureDir(name), {.num_threads = 2});
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? std::move(*m) : nullptr;
}

// Runs `ids` on `slot` in chunks of at most `chunk` tokens, cut at segment boundaries, closing each
// full segment with a close chunk before the next content (the engine's STREAMING policy). Returns
// every content token's logits [n, vocab].
std::vector<float> RunChunked(const Model& m, StatePool& pool, int slot, std::span<const int32_t> ids, size_t chunk) {
  std::vector<float> out;
  for (size_t i = 0; i < ids.size();) {
    const int64_t left = m.SegmentTokensLeft(pool, slot);
    if (left == 0) {
      SequenceChunk close{.slot = slot, .close_segment = true};
      auto r = m.Forward({&close, 1}, pool);
      EXPECT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->dim(0), 0);  // a close has no logits
      continue;
    }
    const size_t take = std::min({chunk, ids.size() - i, static_cast<size_t>(left)});
    SequenceChunk c{.slot = slot, .tokens = ids.subspan(i, take), .all_logits = true};
    auto r = m.Forward({&c, 1}, pool);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return {};
    const std::vector<float> part = *r->ToHostF32();
    out.insert(out.end(), part.begin(), part.end());
    i += take;
  }
  return out;
}

// Slot `slot`'s associative memory, every layer's A then z.
std::vector<float> MemoryState(StatePool& pool, int layers, int slot) {
  std::vector<float> out;
  for (int l = 0; l < layers; ++l) {
    for (const char* name : {"assoc_a", "assoc_z"}) {
      const kernels::Tensor& t = pool.layer(l).at(name);
      const std::vector<float> all = *t.ToHostF32();
      const int64_t per = t.numel() / t.dim(0);
      out.insert(out.end(), all.begin() + slot * per, all.begin() + (slot + 1) * per);
    }
  }
  return out;
}

// GPT-2: V·D + Np·D + L·(4D + 3D² + 3D + D² + D + 2DI + I + D) + 2D; ARMT: L(2PD + D² + D + 1) + MD.
int64_t ArmtParameters(const ModelConfig& c, bool wrap) {
  const int64_t d = c.hidden_size, i = c.intermediate_size, l = c.num_hidden_layers;
  const int64_t p = c.armt.d_mem, m = c.armt.num_mem_tokens;
  const int64_t np = c.armt.n_positions + (wrap ? m : 0);
  const int64_t gpt2 = c.vocab_size * d + np * d + l * (4 * d + 3 * d * d + 3 * d + d * d + d + 2 * d * i + i + d) + 2 * d;
  return gpt2 + l * (2 * p * d + d * d + d + 1) + m * d;
}

TEST(ArmtModelTest, ParameterCountAtLoad) {
  auto m = LoadArmt("armt");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->num_parameters(), ArmtParameters(m->config(), false));
  EXPECT_EQ(m->num_parameters(), 24194);  // the reference's armt_weights.parameter_count
  auto w = LoadArmt("armt_wrap");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->num_parameters(), ArmtParameters(w->config(), true));
  EXPECT_EQ(w->num_parameters(), 12970);
  ModelConfig gpt2;  // GPT-2 small + P 64, M 10: 132,714,252 (extras 8,274,444)
  gpt2.vocab_size = 50257;
  gpt2.hidden_size = 768;
  gpt2.intermediate_size = 3072;
  gpt2.num_hidden_layers = 12;
  gpt2.armt = {.n_positions = 1024, .d_mem = 64};
  gpt2.armt.num_mem_tokens = 10;
  EXPECT_EQ(ArmtParameters(gpt2, false), 132714252);
}

TEST(ArmtModelTest, ParityWithTheReferenceForSeveralPromptLengths) {
  for (const char* name : kFixtures) {
    auto m = LoadArmt(name);
    ASSERT_NE(m, nullptr);
    const ::mcserve::testing::Golden g = LoadGolden(name);
    const size_t s = static_cast<size_t>(m->config().armt.segment_size);
    for (size_t len : {s - 1, s, s + 1, std::min(3 * s + 17, g.prompt_ids.size())}) {
      auto pool = m->NewStatePool(1);
      ASSERT_TRUE(pool.ok());
      const std::vector<float> got = RunChunked(*m, *pool, 0, std::span(g.prompt_ids).first(len), len);
      const std::vector<float> want(g.logits.begin(), g.logits.begin() + len * g.vocab);
      EXPECT_LE(RelativeError(got, want), 1e-4) << name << " prompt length " << len;
    }
  }
}

// After each segment close the golden prompt causes, every layer's A and z equal the reference's
// (golden_state.safetensors: A [closes, L, F, D], z [closes, L, F]).
TEST(ArmtModelTest, MemoryAfterEveryCloseMatchesTheReference) {
  for (const char* name : kFixtures) {
    auto m = LoadArmt(name);
    ASSERT_NE(m, nullptr);
    auto file = SafetensorsFile::Open(FixtureDir(name) + "/golden_state.safetensors");
    ASSERT_TRUE(file.ok()) << file.status();
    const std::vector<float> a = ::mcserve::testing::ReadEntry<float>(**file, "A");
    const std::vector<float> z = ::mcserve::testing::ReadEntry<float>(**file, "z");
    const ModelConfig& c = m->config();
    const int layers = static_cast<int>(c.num_hidden_layers);
    const int64_t f = c.armt.feat_dim, d = c.hidden_size, s = c.armt.segment_size;
    const std::vector<int32_t> ids = LoadGolden(name).prompt_ids;
    const int64_t closes = (static_cast<int64_t>(ids.size()) - 1) / s;
    ASSERT_EQ(static_cast<int64_t>(a.size()), closes * layers * f * d);
    auto pool = m->NewStatePool(1);
    ASSERT_TRUE(pool.ok());
    for (int64_t k = 1; k <= closes; ++k) {  // the k-th segment, then its close
      RunChunked(*m, *pool, 0, std::span(ids).subspan((k - 1) * s, s), 4);
      SequenceChunk close{.slot = 0, .close_segment = true};
      ASSERT_TRUE(m->Forward({&close, 1}, *pool).ok());
      std::vector<float> want;  // per layer A then z, as MemoryState
      for (int l = 0; l < layers; ++l) {
        const auto ab = a.begin() + ((k - 1) * layers + l) * f * d;
        const auto zb = z.begin() + ((k - 1) * layers + l) * f;
        want.insert(want.end(), ab, ab + f * d);
        want.insert(want.end(), zb, zb + f);
      }
      EXPECT_LE(RelativeError(MemoryState(*pool, layers, 0), want), 1e-4) << name << " after close " << k;
    }
  }
}

TEST(ArmtModelTest, ChunkSizesGiveTheSameLogitsAndState) {
  for (const char* name : kFixtures) {
    auto m = LoadArmt(name);
    ASSERT_NE(m, nullptr);
    const std::vector<int32_t> ids = LoadGolden(name).prompt_ids;
    const size_t s = static_cast<size_t>(m->config().armt.segment_size);
    const int layers = static_cast<int>(m->config().num_hidden_layers);
    auto ref_pool = m->NewStatePool(1);
    ASSERT_TRUE(ref_pool.ok());
    const std::vector<float> whole = RunChunked(*m, *ref_pool, 0, ids, ids.size());
    const std::vector<float> state = MemoryState(*ref_pool, layers, 0);
    for (size_t chunk : {size_t{1}, size_t{7}, s, 3 * s}) {
      auto pool = m->NewStatePool(2);
      ASSERT_TRUE(pool.ok());
      EXPECT_LE(RelativeError(RunChunked(*m, *pool, 1, ids, chunk), whole), 1e-5) << name << " chunk " << chunk;
      EXPECT_LE(RelativeError(MemoryState(*pool, layers, 1), state), 1e-5) << name << " chunk " << chunk;
      EXPECT_EQ(pool->closed_segments(1), ref_pool->closed_segments(0));
    }
  }
}

TEST(ArmtModelTest, BatchOfDifferentLengthsEqualsEachAlone) {
  auto m = LoadArmt("armt");
  ASSERT_NE(m, nullptr);
  const std::vector<int32_t> ids = LoadGolden("armt").prompt_ids;
  const int64_t s = m->config().armt.segment_size, v = m->config().vocab_size;
  // Slot 0 runs ids in segment-sized chunks; slot 1 one token at a time; slot 2 the first S then
  // stops. Each step batches whatever each slot does next: content, a close, or nothing.
  auto pool = m->NewStatePool(3);
  ASSERT_TRUE(pool.ok());
  const size_t limit[3] = {ids.size(), 20, static_cast<size_t>(s)}, chunk[3] = {static_cast<size_t>(s), 1, 4};
  size_t done[3] = {0, 0, 0};
  std::vector<float> got[3];
  int closes_batched_with_content = 0;
  while (done[0] < limit[0] || done[1] < limit[1] || done[2] < limit[2]) {
    std::vector<SequenceChunk> batch;
    for (int slot = 0; slot < 3; ++slot) {
      if (done[slot] == limit[slot]) continue;
      const int64_t left = m->SegmentTokensLeft(*pool, slot);
      if (left == 0) {
        batch.push_back({.slot = slot, .close_segment = true});
        continue;
      }
      const size_t take = std::min({chunk[slot], limit[slot] - done[slot], static_cast<size_t>(left)});
      batch.push_back({.slot = slot, .tokens = std::span(ids).subspan(done[slot], take), .all_logits = true});
    }
    const bool has_close = std::any_of(batch.begin(), batch.end(), [](auto& c) { return c.close_segment; });
    const bool has_content = std::any_of(batch.begin(), batch.end(), [](auto& c) { return !c.close_segment; });
    closes_batched_with_content += has_close && has_content;
    auto r = m->Forward(batch, *pool);
    ASSERT_TRUE(r.ok()) << r.status();
    const std::vector<float> logits = *r->ToHostF32();
    size_t row = 0;
    for (const SequenceChunk& c : batch) {
      if (c.close_segment) continue;
      got[c.slot].insert(got[c.slot].end(), logits.begin() + row * v, logits.begin() + (row + c.tokens.size()) * v);
      row += c.tokens.size();
      done[c.slot] += c.tokens.size();
    }
  }
  EXPECT_GT(closes_batched_with_content, 0);
  for (int slot = 0; slot < 3; ++slot) {
    auto alone = m->NewStatePool(1);
    ASSERT_TRUE(alone.ok());
    const std::vector<float> want = RunChunked(*m, *alone, 0, std::span(ids).first(limit[slot]), 1000);
    // The first segment reads no memory: float32 GEMM rounding only (OpenBLAS blocks by row count).
    const std::vector<float> first(got[slot].begin(), got[slot].begin() + s * v);
    EXPECT_LE(RelativeError(first, std::vector<float>(want.begin(), want.begin() + s * v)), 1e-6) << "slot " << slot;
    // Later segments divide by z·φ + eps in every read, so those rounding differences grow with each
    // close (measured: 2e-7 in segment 0 up to 2.4e-5 in segment 5); the bound is the reference's.
    EXPECT_LE(RelativeError(got[slot], want), 1e-4) << "slot " << slot;
  }
}

TEST(ArmtModelTest, ForwardRefusesChunksPastTheSegmentAndEarlyCloses) {
  auto m = LoadArmt("armt");  // S = 6
  ASSERT_NE(m, nullptr);
  const std::vector<int32_t> ids = LoadGolden("armt").prompt_ids;
  auto pool = m->NewStatePool(1);
  ASSERT_TRUE(pool.ok());
  SequenceChunk too_long{.slot = 0, .tokens = std::span(ids).first(7)};
  EXPECT_TRUE(HasError(m->Forward({&too_long, 1}, *pool).status(), absl::StatusCode::kInvalidArgument,
                       {"armt", "0 of 6", "close the segment first"}));
  EXPECT_EQ(pool->position(0), 0);  // refused before any state changed
  SequenceChunk early{.slot = 0, .close_segment = true};
  EXPECT_TRUE(HasError(m->Forward({&early, 1}, *pool).status(), absl::StatusCode::kInvalidArgument,
                       {"close", "full segment"}));
  RunChunked(*m, *pool, 0, std::span(ids).first(6), 6);
  EXPECT_EQ(m->SegmentTokensLeft(*pool, 0), 0);
  EXPECT_EQ(m->close_tokens(), 2);
  SequenceChunk one{.slot = 0, .tokens = std::span(ids).subspan(6, 1)};
  EXPECT_FALSE(m->Forward({&one, 1}, *pool).ok());
  EXPECT_TRUE(m->Forward({&early, 1}, *pool).ok());
  EXPECT_EQ(m->SegmentTokensLeft(*pool, 0), 6);
  EXPECT_EQ(pool->closed_segments(0), 1);
}

// A copy of the armt fixture in `dir` with the official state_dict's aliases added: lm_head (= wte, or
// wte with one element changed when `break_head`) and layer 1's `memory_cell.layers.1.W_mq.weight`.
void WriteWithAliases(const std::string& dir, bool break_head) {
  for (const char* f : {"config.json", "tokenizer.model"}) {
    std::filesystem::copy_file(FixtureDir("armt") + "/" + f, dir + "/" + f);
  }
  auto store = WeightStore::Open(FixtureDir("armt"));
  ASSERT_TRUE(store.ok()) << store.status();
  std::vector<testing::TensorBytes> tensors;
  auto add = [&](const std::string& name, const std::string& from, bool change) {
    kernels::Tensor t = *(*store)->Get(from);
    std::vector<float> v = *t.ToHostF32();
    if (change) v[3] += 0.5f;
    tensors.push_back({name, "F32", {t.shape().begin(), t.shape().end()}, testing::F32Bytes(v)});
  };
  for (const std::string& name : (*store)->Names()) add(name, name, false);
  add("memory_cell.model.lm_head.weight", "memory_cell.model.transformer.wte.weight", break_head);
  add("memory_cell.layers.1.W_mq.weight", "memory_cell.model.transformer.h.1.W_mq.weight", false);
  testing::WriteFile(dir + "/model.safetensors", testing::BuildSafetensors(tensors));
}

TEST(ArmtModelTest, AliasesMustEqualTheirTensor) {
  const std::string base = ::testing::TempDir() + "/armt_aliases";
  for (bool broken : {false, true}) {
    const std::string dir = base + (broken ? "_broken" : "_ok");
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    WriteWithAliases(dir, broken);
    auto m = Model::Load(dir, {.num_threads = 1});
    if (!broken) {
      ASSERT_TRUE(m.ok()) << m.status();
      EXPECT_EQ((*m)->num_parameters(), 24194);  // aliases are not parameters
    } else {
      EXPECT_TRUE(HasError(m.status(), absl::StatusCode::kInvalidArgument,
                           {"memory_cell.model.lm_head.weight", "must equal", "wte.weight"}));
    }
  }
}

TEST(ArmtModelTest, MemoryCachingIsRefusedNamingIt) {
  auto m = Model::Load(FixtureDir("armt"), {.mc_overrides = {{"aggregation", "grm"}}});
  EXPECT_TRUE(HasError(m.status(), absl::StatusCode::kUnimplemented, {"armt", "Memory Caching"}));
}

TEST(ArmtModelTest, OtherFamiliesNeverClose) {
  auto m = Model::Load(FixtureDir("gam"), {.num_threads = 1});
  ASSERT_TRUE(m.ok()) << m.status();
  auto pool = (*m)->NewStatePool(1);
  ASSERT_TRUE(pool.ok());
  EXPECT_EQ((*m)->close_tokens(), 0);
  EXPECT_EQ((*m)->SegmentTokensLeft(*pool, 0), std::numeric_limits<int64_t>::max());
  SequenceChunk close{.slot = 0, .close_segment = true};
  EXPECT_TRUE(HasError((*m)->Forward({&close, 1}, *pool).status(), absl::StatusCode::kInvalidArgument, {"gam"}));
}

}  // namespace
}  // namespace mcserve::engine
