// HOPE with an adaptive CMS (cms_adaptive; fixture hope_adaptive: two trained levels of periods 3 and
// 5) beyond the every-fixture parity tests: on a 70-token sequence, prefill in chunks of any size (1,
// 7, 64 and sizes that cut both periods at every phase) is bit-identical to token-by-token decode;
// generated tokens do not train the CMS (the reference's greedy ids when they would differ); the
// learn flag of a chunk decides whether the position before it trains; a reset slot starts again
// from the checkpoint weights (Reset clears Δθ, G and the saved token); with adaptive_q, M_q on the head
// slices of u trains exactly as on an identity in_proj (the fixture pins the in_proj path).
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "engine/model/safetensors.h"
#include "engine/runner/model.h"
#include "fixture_util.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/chunked_logits.h"
#include "tests/unit/engine/model_test_util.h"
#include "tests/unit/engine/reference_generate.h"

namespace mcserve::engine {
namespace {

namespace fx = ::mcserve::testing;  // the fixture helpers (fixture_util.h, reference_generate.h)
using fx::ChunkedLogits;
using fx::FixtureDir;
using fx::RelativeError;
using testing::CopyFixturePatched;  // model_test_util.h
using testing::PutF32;

constexpr char kFixture[] = "hope_adaptive";

// The golden prompt followed by deterministic ids up to 70 tokens.
std::vector<int32_t> LongSequence(int64_t vocab) {
  std::vector<int32_t> ids = fx::LoadGolden(kFixture).prompt_ids;
  for (int i = 0; ids.size() < 70; ++i) ids.push_back(static_cast<int32_t>(3 + (37 * i + 11) % (vocab - 3)));
  return ids;
}

class HopeAdaptiveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = Model::Load(FixtureDir(kFixture), {.num_threads = 2});
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = std::move(*m);
    ASSERT_TRUE(model_->config().hope.AdaptiveCms());
    ids_ = LongSequence(model_->config().vocab_size);
  }
  std::unique_ptr<Model> model_;
  std::vector<int32_t> ids_;
};

TEST_F(HopeAdaptiveTest, AnyChunkingIsBitIdenticalToDecode) {
  auto pool = model_->NewStatePool(1);
  ASSERT_TRUE(pool.ok());
  const std::vector<float> decode = ChunkedLogits(*model_, *pool, 0, ids_, 1);
  ASSERT_EQ(decode.size(), ids_.size() * model_->config().vocab_size);
  for (int chunk : {2, 3, 4, 5, 6, 7, 8, 11, 15, 16, 64}) {
    ASSERT_TRUE(pool->Reset(0).ok());
    EXPECT_EQ(ChunkedLogits(*model_, *pool, 0, ids_, chunk), decode) << "chunk " << chunk;
  }
}

TEST_F(HopeAdaptiveTest, TrainingChangesTheLogits) {
  // Without any learned token the model is the checkpoint's; with them it must differ (lr > 0).
  auto pool = model_->NewStatePool(1);
  ASSERT_TRUE(pool.ok());
  const std::vector<float> learned = ChunkedLogits(*model_, *pool, 0, ids_, 1);
  ASSERT_TRUE(pool->Reset(0).ok());
  const std::vector<float> frozen = ChunkedLogits(*model_, *pool, 0, ids_, 1, [](size_t) { return false; });
  EXPECT_GT(RelativeError(learned, frozen), 1e-2);
  // The first three logits rows come before the first boundary (period 3): training has not applied yet.
  const size_t v = model_->config().vocab_size;
  EXPECT_EQ(std::vector<float>(learned.begin(), learned.begin() + 3 * v),
            std::vector<float>(frozen.begin(), frozen.begin() + 3 * v));
}

TEST_F(HopeAdaptiveTest, GeneratedTokensDoNotTrain) {
  const fx::Golden golden = fx::LoadGolden(kFixture);
  auto file = SafetensorsFile::Open(FixtureDir(kFixture) + "/golden.safetensors");
  ASSERT_TRUE(file.ok()) << file.status();
  const std::vector<int32_t> would_train = fx::ReadEntry<int32_t>(**file, "greedy_ids_learning_generated");
  ASSERT_EQ(would_train.size(), golden.greedy_ids.size());
  ASSERT_NE(would_train, golden.greedy_ids);  // the fixture tells the two apart
  auto pool = model_->NewStatePool(1);
  ASSERT_TRUE(pool.ok());
  const fx::GenerateOptions options{.max_tokens = static_cast<int>(golden.greedy_ids.size()), .prefill_chunk = 5,
                                         .stop_at_eos = false, .sampling = {.temperature = 0.0f}};
  auto generated = fx::Generate(*model_, *pool, 0, golden.prompt_ids, options);  // decodes with learn = false
  ASSERT_TRUE(generated.ok()) << generated.status();
  EXPECT_EQ(*generated, golden.greedy_ids);
  // Feeding the same tokens back as if user-provided trains on them: the reference's other run.
  ASSERT_TRUE(pool->Reset(0).ok());
  auto last = fx::Prefill(*model_, *pool, 0, golden.prompt_ids, 64);
  ASSERT_TRUE(last.ok());
  std::vector<int32_t> learned_ids;
  for (size_t i = 0; i < would_train.size(); ++i) {
    learned_ids.push_back(static_cast<int32_t>(std::max_element(last->begin(), last->end()) - last->begin()));
    const SequenceChunk c{.slot = 0, .tokens = {&learned_ids.back(), 1}, .learn = true};
    auto next = model_->Forward({&c, 1}, *pool);
    ASSERT_TRUE(next.ok());
    last = next->ToHostF32();
  }
  EXPECT_EQ(learned_ids, would_train);
}

TEST_F(HopeAdaptiveTest, AResetSlotForgetsWhatItLearned) {
  auto pool = model_->NewStatePool(2);
  ASSERT_TRUE(pool.ok());
  const std::vector<float> fresh = ChunkedLogits(*model_, *pool, 1, ids_, 9);
  // Slot 0 trains on a long sequence, is reset, and then must equal the fresh slot.
  ASSERT_FALSE(ChunkedLogits(*model_, *pool, 0, LongSequence(model_->config().vocab_size), 4).empty());
  ASSERT_TRUE(pool->Reset(0).ok());
  EXPECT_EQ(ChunkedLogits(*model_, *pool, 0, ids_, 9), fresh);
}

// Copies fixture `name` into `dir` with every in_proj.weight [H·d, hidden] set to the identity and, when
// `heads`, config.json's memory_input switched to slice (head slices of u; the in_proj tensors go unused).
void WriteIdentityInProjCopy(const std::string& name, const std::string& dir, bool heads) {
  int patched = 0;
  CopyFixturePatched(FixtureDir(name), dir, [&](const SafetensorsEntry& e, char* bytes) {
    if (!e.name.ends_with(".attn.in_proj.weight")) return;
    ASSERT_EQ(e.shape[0], e.shape[1]);
    for (int64_t i = 0; i < e.shape[0]; ++i) {
      for (int64_t j = 0; j < e.shape[1]; ++j) PutF32(bytes, i * e.shape[1] + j, i == j ? 1.0f : 0.0f);
    }
    ++patched;
  });
  ASSERT_GT(patched, 0);
  if (!heads) return;
  std::ifstream cin(dir + "/config.json");
  std::string config((std::istreambuf_iterator<char>(cin)), std::istreambuf_iterator<char>());
  cin.close();
  const std::string from = "\"memory_input\": \"proj\"";
  const size_t at = config.find(from);
  ASSERT_NE(at, std::string::npos);
  config.replace(at, from.size(), "\"memory_input\": \"slice\"");
  std::ofstream(dir + "/config.json", std::ios::trunc) << config;
}

TEST(HopeAdaptiveQTest, HeadSlicesTrainAsAnIdentityInProj) {
  const char* fixture = "hope_adaptive_q_after_write";
  testing::TempDir proj_dir, heads_dir;
  WriteIdentityInProjCopy(fixture, proj_dir.path(), /*heads=*/false);
  WriteIdentityInProjCopy(fixture, heads_dir.path(), /*heads=*/true);
  auto proj = Model::Load(proj_dir.path(), {.num_threads = 1});
  auto heads = Model::Load(heads_dir.path(), {.num_threads = 1});
  ASSERT_TRUE(proj.ok()) << proj.status();
  ASSERT_TRUE(heads.ok()) << heads.status();
  ASSERT_TRUE((*heads)->config().hope.adaptive_q && !(*heads)->config().hope.memory_input_proj);
  ASSERT_TRUE((*proj)->config().hope.memory_input_proj && (*proj)->config().hope.AdaptiveCms());
  const std::vector<int32_t> ids = LongSequence((*proj)->config().vocab_size);
  auto proj_pool = (*proj)->NewStatePool(1);
  auto heads_pool = (*heads)->NewStatePool(1);
  ASSERT_TRUE(proj_pool.ok() && heads_pool.ok());
  const std::vector<float> a = ChunkedLogits(**proj, *proj_pool, 0, ids, 7);
  const std::vector<float> b = ChunkedLogits(**heads, *heads_pool, 0, ids, 7);
  EXPECT_LE(RelativeError(b, a), 1e-6);
  // ... and the training matters: the same ids without learning differ.
  ASSERT_TRUE(heads_pool->Reset(0).ok());
  EXPECT_GT(RelativeError(ChunkedLogits(**heads, *heads_pool, 0, ids, 7, [](size_t) { return false; }), a), 1e-2);
}

}  // namespace
}  // namespace mcserve::engine
