// Per-thread scratch: zeroed on every call, kept between calls (no regrowth for smaller requests),
// separate for loop bodies, op inputs and projection inputs, and separate per thread.
#include "kernels/cpu/scratch.h"

#include <thread>

#include "gtest/gtest.h"
#include "kernels/core/host_block_cache.h"

namespace mcserve::kernels::cpu {
namespace {

TEST(ScratchTest, ZeroedKeptAndIndependent) {
  std::span<float> a = ThreadScratch(100);
  for (float& v : a) v = 1.0f;
  std::span<float> op = OpScratch(100);
  EXPECT_NE(op.data(), a.data());
  std::span<float> b = ThreadScratch(50);
  EXPECT_EQ(b.data(), a.data());  // the same memory, not a new buffer
  for (float v : b) ASSERT_EQ(v, 0.0f);
  float* other_thread = nullptr;
  std::thread([&] { other_thread = ThreadScratch(10).data(); }).join();
  EXPECT_NE(other_thread, a.data());
}

// The projection-input buffer is a third one per thread: a serial op's OpScratch never lands on the
// lines a projection's workers read, and the two keep their contents across each other's calls.
TEST(ScratchTest, ProjectionInputIsApartFromTheOtherBuffers) {
  std::span<float> x = ProjectionInputScratchForOverwrite(64);
  for (float& v : x) v = 2.0f;
  std::span<float> op = OpScratch(64);
  std::span<float> body = ThreadScratch(64);
  EXPECT_NE(x.data(), op.data());
  EXPECT_NE(x.data(), body.data());
  for (float& v : op) v = 3.0f;
  EXPECT_EQ(ProjectionInputScratchForOverwrite(32).data(), x.data());  // kept, not regrown
  if (!PoisonForOverwrite()) {
    for (float v : x) ASSERT_EQ(v, 2.0f);  // untouched by the OpScratch writes
  }
  for (float v : ProjectionInputScratch(64)) ASSERT_EQ(v, 0.0f);  // the zeroed form
  float* other_thread = nullptr;
  std::thread([&] { other_thread = ProjectionInputScratch(10).data(); }).join();
  EXPECT_NE(other_thread, x.data());
}

TEST(ScratchTest, CarverHandsOutConsecutivePieces) {
  ScratchCarver c(ThreadScratch(10));
  std::span<float> x = c.Take(3), y = c.Take(7);
  EXPECT_EQ(x.size(), 3u);
  EXPECT_EQ(y.data(), x.data() + 3);
  EXPECT_EQ(y.size(), 7u);
}

}  // namespace
}  // namespace mcserve::kernels::cpu
