// HOPE (docs/model-format.md, `hope`) beyond the every-fixture parity tests: on a 70-token sequence,
// prefill in chunks that cut the anchor periods (C_o, C_mem) and the CMS level periods at every phase
// equals token-by-token decode, and a slot reused after a request starts again from the learned
// initial fast weights (the adaptive-CMS fixtures too: their chunking is bit-identical to decode).
#include <string>
#include <vector>

#include "engine/runner/model.h"
#include "fixture_util.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/chunked_logits.h"

namespace mcserve::engine {
namespace {

using mcserve::testing::ChunkedLogits;

using testing::FixtureDir;
using testing::RelativeError;

// The golden prompt followed by deterministic ids up to 70 tokens.
std::vector<int32_t> LongSequence(const std::string& fixture, int64_t vocab) {
  std::vector<int32_t> ids = testing::LoadGolden(fixture).prompt_ids;
  for (int i = 0; ids.size() < 70; ++i) ids.push_back(static_cast<int32_t>(3 + (37 * i + 11) % (vocab - 3)));
  return ids;
}

class HopeModelTest : public ::testing::TestWithParam<std::string> {};

TEST_P(HopeModelTest, ChunksCuttingAnchorsAndLevelsEqualDecode) {
  auto model = Model::Load(FixtureDir(GetParam()), {.num_threads = 2});
  ASSERT_TRUE(model.ok()) << model.status();
  const HopeConfig& h = (*model)->config().hope;
  ASSERT_LT(h.chunk_size_other, 8);  // the sequence crosses many anchor refreshes
  const std::vector<int32_t> ids = LongSequence(GetParam(), (*model)->config().vocab_size);
  auto pool = (*model)->NewStatePool(1);
  ASSERT_TRUE(pool.ok());
  const std::vector<float> decode = ChunkedLogits(**model, *pool, 0, ids, 1);
  for (int chunk : {2, 3, 4, 5, 6, 7, 9, 16, 17, 64}) {
    ASSERT_TRUE(pool->Reset(0).ok());
    EXPECT_LE(RelativeError(ChunkedLogits(**model, *pool, 0, ids, chunk), decode), 1e-5) << "chunk " << chunk;
  }
}

TEST_P(HopeModelTest, AReusedSlotStartsFromTheLearnedInitialWeights) {
  auto model = Model::Load(FixtureDir(GetParam()), {.num_threads = 1});
  ASSERT_TRUE(model.ok()) << model.status();
  const std::vector<int32_t> ids = LongSequence(GetParam(), (*model)->config().vocab_size);
  auto pool = (*model)->NewStatePool(2);
  ASSERT_TRUE(pool.ok());
  const std::vector<float> fresh = ChunkedLogits(**model, *pool, 1, ids, 64);
  ASSERT_TRUE(pool->Reset(1).ok());
  EXPECT_EQ(ChunkedLogits(**model, *pool, 1, ids, 64), fresh);  // bit-identical
}

INSTANTIATE_TEST_SUITE_P(Fixtures, HopeModelTest,
                         ::testing::Values("hope", "hope_variants", "hope_anchor_momentum", "hope_adaptive",
                                           "hope_adaptive_variants", "hope_adaptive_q_after_write"));

}  // namespace
}  // namespace mcserve::engine
