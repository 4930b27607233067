// Memory Caching's steady-state decode step allocates nothing: over 100 batched decode steps of
// Model::Forward with MC on, every step that neither closes a segment nor is the first to read a new
// checkpoint makes no heap allocation on any thread. Closing a segment freezes a new page (memory the
// request keeps), and the first read of one more page may grow the read-out lists' capacity once.
// One thread: the read-outs' per-thread scratch grows the first time a thread runs a path, and on
// two threads which thread first runs a page read-out is up to the scheduler (a one-time cost per
// thread, not a per-step one); decode_allocation_test covers the pool's threads without MC.
#include <map>
#include <ostream>
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

constexpr int kPrompt = 12;       // prompt tokens per slot
constexpr int kSegment = 16;      // MC segment size: six segments close inside the counted steps
constexpr int kCountedSteps = 100;

struct Case {
  std::string name;
  std::string fixture;
  int batch;
  std::map<std::string, std::string> mc;  // --mc overrides besides segment_size
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name << " at batch " << c.batch; }

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  return info.param.name + "_batch" + std::to_string(info.param.batch);
}

class McDecodeAllocationTest : public ::testing::TestWithParam<Case> {};

TEST_P(McDecodeAllocationTest, StepsBetweenSegmentBoundariesAllocateNothing) {
  const Case& c = GetParam();
  std::map<std::string, std::string> mc = c.mc;
  mc["segment_size"] = std::to_string(kSegment);
  auto model = Model::Load(FixtureDir(c.fixture), {.num_threads = 1, .mc_overrides = mc});
  ASSERT_TRUE(model.ok()) << model.status();
  auto pool = (*model)->NewStatePool(c.batch);
  ASSERT_TRUE(pool.ok()) << pool.status();
  DecodeDriver driver(**model, *pool, c.batch, kPrompt);
  driver.Step(0);                                          // prefill: tokens 1..kPrompt
  for (int s = 1; s <= 2 * kSegment; ++s) driver.Step(s);  // warm-up past two segments: pages exist
  int steady = 0, closing = 0;
  for (int s = 2 * kSegment + 1; s <= 2 * kSegment + kCountedSteps; ++s) {
    const int64_t token = kPrompt + s;  // the token number this step processes (1-based)
    const bool boundary = token % kSegment == 0 || (token - 1) % kSegment == 0;
    CountAllocations count;
    driver.Step(s);
    const int64_t n = count.Stop();
    if (boundary) {
      ++closing;
      continue;
    }
    ++steady;
    EXPECT_EQ(n, 0) << "allocations in decode step " << s << " (token " << token << ") of " << c.name
                    << " at batch " << c.batch;
  }
  EXPECT_GT(closing, 0);  // the window does cross segment boundaries
  EXPECT_GT(steady, 80);
}

INSTANTIATE_TEST_SUITE_P(
    Aggregations, McDecodeAllocationTest,
    ::testing::Values(Case{"gdn_ssc", "gated_deltanet", 1, {{"aggregation", "ssc"}, {"top_k", "2"}}},
                      Case{"gdn_ssc", "gated_deltanet", 4, {{"aggregation", "ssc"}, {"top_k", "2"}}},
                      Case{"gdn_grm", "gated_deltanet", 4, {{"aggregation", "grm"}}},
                      Case{"gdn_residual", "gated_deltanet", 4, {{"aggregation", "residual"}}},
                      Case{"gdn_mean", "gated_deltanet", 4, {{"aggregation", "mean"}}},
                      Case{"gdn_uproj_ssc", "gated_deltanet_mc_uproj", 4, {{"aggregation", "ssc"}}},
                      Case{"titans_mlp_ssc", "titans_mlp", 4, {{"aggregation", "ssc"}, {"top_k", "2"}}},
                      Case{"titans_mlp_grm", "titans_mlp", 4, {{"aggregation", "grm"}}},
                      Case{"dla_grm", "dla", 4, {{"aggregation", "grm"}}},
                      Case{"lattice_ssc", "lattice", 4, {{"aggregation", "ssc"}, {"top_k", "2"}}},
                      Case{"hope_grm", "hope", 4, {{"aggregation", "grm"}}}),
    CaseName);

}  // namespace
}  // namespace mcserve::engine
