// The steady-state decode step allocates nothing: after a prefill and a few warm-up steps, 100 batched
// decode steps of Model::Forward make no heap allocation on any thread (the tensors' host buffers come
// back from the model's HostBlockCache, the kernels' scratch is per thread, the host lists are reused).
#include <string>
#include <vector>

#include "engine/runner/model.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/allocation_counter.h"
#include "tests/unit/engine/fixture_util.h"

namespace mcserve::engine {
namespace {

using mcserve::testing::CountAllocations;
using mcserve::testing::FixtureDir;

struct Case {
  std::string fixture;
  int batch;
};

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  return info.param.fixture + "_batch" + std::to_string(info.param.batch);
}

class DecodeAllocationTest : public ::testing::TestWithParam<Case> {};

// Token ids for slot b at step s: any in-vocabulary pattern (the step's logits are not read).
int32_t TokenAt(int b, int s, int64_t vocab) { return static_cast<int32_t>((7 * b + 13 * s + 3) % vocab); }

TEST_P(DecodeAllocationTest, HundredDecodeStepsAllocateNothing) {
  const Case& c = GetParam();
  auto model = Model::Load(FixtureDir(c.fixture), {.num_threads = 2});
  ASSERT_TRUE(model.ok()) << model.status();
  const int64_t vocab = (*model)->config().vocab_size;
  auto pool = (*model)->NewStatePool(c.batch);
  ASSERT_TRUE(pool.ok()) << pool.status();
  std::vector<std::vector<int32_t>> tokens(c.batch);
  std::vector<SequenceChunk> chunks(c.batch);
  for (int b = 0; b < c.batch; ++b) {
    for (int s = 0; s < 12; ++s) tokens[b].push_back(TokenAt(b, s, vocab));
    chunks[b] = {.slot = b, .tokens = tokens[b]};
  }
  auto step = [&](int s) {
    auto logits = (*model)->Forward(chunks, *pool);
    ASSERT_TRUE(logits.ok()) << logits.status();
    for (int b = 0; b < c.batch; ++b) {
      tokens[b].assign(1, TokenAt(b, s, vocab));  // capacity kept: no allocation
      chunks[b].tokens = tokens[b];
      chunks[b].learn = false;
    }
  };
  step(0);                                 // prefill
  for (int s = 1; s <= 8; ++s) step(s);    // warm-up: the caches reach their steady size
  CountAllocations count;
  for (int s = 9; s < 109; ++s) step(s);
  EXPECT_EQ(count.Stop(), 0) << "allocations in 100 decode steps of " << c.fixture << " at batch " << c.batch;
}

INSTANTIATE_TEST_SUITE_P(Families, DecodeAllocationTest,
                         ::testing::Values(Case{"gated_deltanet", 1}, Case{"gated_deltanet", 4}, Case{"gated_deltanet", 32},
                                           Case{"gated_deltanet_gva_bf16", 32},
                                           Case{"gated_deltanet_gva_bf16", 4}, Case{"delta_net", 4},
                                           Case{"gla", 4}, Case{"swla", 4}, Case{"titans", 4},
                                           Case{"titans_mlp", 4}, Case{"linear_attn_identity", 4},
                                           Case{"linear_attn_dpfp", 4}, Case{"dla", 4}, Case{"lattice", 4},
                                           Case{"hope", 4}, Case{"gam_clamp", 4}),
                         CaseName);

}  // namespace
}  // namespace mcserve::engine
