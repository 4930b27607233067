// The steady-state decode step allocates nothing: after a prefill and a few warm-up steps, 100 batched
// decode steps of Model::Forward make no heap allocation on any thread (the tensors' host buffers come
// back from the model's HostBlockCache, the kernels' scratch is per thread, the host lists are reused).
#include <string>
#include <vector>

#include "engine/runner/model.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/allocation_counter.h"
#include "tests/unit/engine/decode_driver.h"
#include "tests/unit/engine/fixture_util.h"

namespace mcserve::engine {
namespace {

using mcserve::testing::CountAllocations;
using mcserve::testing::DecodeDriver;
using mcserve::testing::FixtureDir;

struct Case {
  std::string fixture;
  int batch;
};

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  return info.param.fixture + "_batch" + std::to_string(info.param.batch);
}

class DecodeAllocationTest : public ::testing::TestWithParam<Case> {};

TEST_P(DecodeAllocationTest, HundredDecodeStepsAllocateNothing) {
  const Case& c = GetParam();
  auto model = Model::Load(FixtureDir(c.fixture), {.num_threads = 2});
  ASSERT_TRUE(model.ok()) << model.status();
  auto pool = (*model)->NewStatePool(c.batch);
  ASSERT_TRUE(pool.ok()) << pool.status();
  DecodeDriver driver(**model, *pool, c.batch, 12);
  driver.Step(0);                                 // prefill
  for (int s = 1; s <= 8; ++s) driver.Step(s);    // warm-up: the caches reach their steady size
  CountAllocations count;
  for (int s = 9; s < 109; ++s) driver.Step(s);
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
