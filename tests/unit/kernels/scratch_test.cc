// Per-thread scratch: zeroed on every call, kept between calls (no regrowth for smaller requests),
// separate for loop bodies and op inputs, and separate per thread.
#include "kernels/cpu/scratch.h"

#include <thread>

#include "gtest/gtest.h"

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

TEST(ScratchTest, CarverHandsOutConsecutivePieces) {
  ScratchCarver c(ThreadScratch(10));
  std::span<float> x = c.Take(3), y = c.Take(7);
  EXPECT_EQ(x.size(), 3u);
  EXPECT_EQ(y.data(), x.data() + 3);
  EXPECT_EQ(y.size(), 7u);
}

}  // namespace
}  // namespace mcserve::kernels::cpu
