// LoopTiming: the pool's per-loop tick counts, summed and averaged into its one stderr line; a pool
// built with MCSERVE_POOL_TIMING=1 prints it when destroyed, and without it prints nothing.
#include "kernels/cpu/loop_timing.h"

#include <cstdlib>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/thread_pool.h"

namespace mcserve::kernels::cpu {
namespace {

using ::testing::HasSubstr;

TEST(LoopTimingTest, AveragesEachPartPerLoop) {
  LoopTiming t;
  for (int loop = 0; loop < 4; ++loop) {
    t.Publishing();
    const uint64_t start = LoopTiming::Now();
    t.Ran(/*worker=*/false, start, start + 100);
    t.Ran(/*worker=*/true, start, start + 300);
    t.Waited(start - 50, start);  // ends in the past: the next loop's serial time stays positive
  }
  testing::internal::CaptureStderr();
  t.Print();
  const std::string line = testing::internal::GetCapturedStderr();
  EXPECT_THAT(line, HasSubstr("4 loops (4 worker runs)"));
  EXPECT_THAT(line, HasSubstr("caller's chunks 100,"));
  EXPECT_THAT(line, HasSubstr("chunks 300\n"));
  EXPECT_THAT(line, HasSubstr("(0 of it in 0 waits over 100000 ticks)"));
}

TEST(LoopTimingTest, CountsTheLongWaitsApart) {
  LoopTiming t;
  for (const uint64_t wait : {uint64_t{10}, LoopTiming::kLongWaitTicks + 1000}) {
    t.Publishing();
    t.Waited(1000, 1000 + wait);
  }
  testing::internal::CaptureStderr();
  t.Print();
  const std::string line = testing::internal::GetCapturedStderr();
  EXPECT_THAT(line, HasSubstr("2 loops"));
  EXPECT_THAT(line, HasSubstr("in 1 waits over 100000 ticks)"));
}

TEST(LoopTimingTest, APoolPrintsOnlyWhenAskedFor) {
  for (const bool asked : {false, true}) {
    if (asked) {
      setenv("MCSERVE_POOL_TIMING", "1", 1);
    } else {
      unsetenv("MCSERVE_POOL_TIMING");
    }
    testing::internal::CaptureStderr();
    {
      ThreadPool pool(2);
      for (int i = 0; i < 10; ++i) pool.ParallelFor(64, [](int64_t, int64_t) {});
    }
    const std::string out = testing::internal::GetCapturedStderr();
    if (asked) {
      EXPECT_THAT(out, HasSubstr("mcserve pool timing: 10 loops"));
    } else {
      EXPECT_EQ(out, "");
    }
  }
  unsetenv("MCSERVE_POOL_TIMING");
}

}  // namespace
}  // namespace mcserve::kernels::cpu
