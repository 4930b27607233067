// OutputChannel: bounded token events, the final event always fits, OUT_OF_RANGE after it,
// cancellation, and the scheduler wake-up when a consumer frees room or cancels.
#include "engine/serving/output_channel.h"

#include <memory>
#include <thread>

#include "gtest/gtest.h"

namespace mcserve::engine {
namespace {

constexpr absl::Duration kTimeout = absl::Seconds(60);

TEST(OutputChannelTest, BoundedFinalAlwaysFitsThenOutOfRange) {
  auto waker = std::make_shared<SchedulerWaker>();
  OutputChannel ch(2, waker);
  EXPECT_EQ(ch.Next(absl::Milliseconds(1)).status().code(), absl::StatusCode::kDeadlineExceeded);
  OutputEvent e;
  e.token_id = 1;
  EXPECT_TRUE(ch.Push(e));
  EXPECT_TRUE(ch.HasRoom());
  EXPECT_TRUE(ch.Push(e));
  EXPECT_FALSE(ch.HasRoom());
  EXPECT_FALSE(ch.Push(e));
  OutputEvent fin;
  fin.finish = FinishReason::kLength;
  ch.Finish(fin);
  EXPECT_TRUE(ch.closed());
  EXPECT_EQ(ch.size(), 3u);
  ch.Finish(fin);  // no-op once closed
  EXPECT_EQ(ch.size(), 3u);
  EXPECT_EQ(ch.Next(kTimeout)->token_id, 1);
  EXPECT_EQ(ch.Next(kTimeout)->token_id, 1);
  EXPECT_EQ(ch.Next(kTimeout)->finish, FinishReason::kLength);
  EXPECT_EQ(ch.Next(kTimeout).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_FALSE(ch.cancelled());
  ch.Cancel();
  EXPECT_TRUE(ch.cancelled());
}

TEST(OutputChannelTest, NextWakesOnPushFromAnotherThread) {
  OutputChannel ch(4, std::make_shared<SchedulerWaker>());
  std::thread producer([&] {
    OutputEvent e;
    e.token_id = 42;
    ch.Push(e);
  });
  absl::StatusOr<OutputEvent> got = ch.Next(kTimeout);
  producer.join();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->token_id, 42);
}

// Popping from a full channel and cancelling wake the scheduler; popping with room to spare doesn't.
TEST(OutputChannelTest, ConsumerWakesTheSchedulerWhenItFreesRoomOrCancels) {
  auto waker = std::make_shared<SchedulerWaker>();
  OutputChannel ch(2, waker);
  OutputEvent e;
  e.token_id = 3;
  ASSERT_TRUE(ch.Push(e));
  ASSERT_TRUE(ch.Next(kTimeout).ok());  // had room: no wake-up needed
  EXPECT_FALSE(waker->Wait(absl::ZeroDuration()));
  ASSERT_TRUE(ch.Push(e));
  ASSERT_TRUE(ch.Push(e));
  ASSERT_TRUE(ch.Next(kTimeout).ok());  // was full: the scheduler may schedule it again
  EXPECT_TRUE(waker->Wait(absl::ZeroDuration()));
  EXPECT_FALSE(waker->Wait(absl::ZeroDuration()));  // consumed
  ch.Cancel();
  EXPECT_TRUE(waker->Wait(absl::ZeroDuration()));
  EXPECT_TRUE(ch.cancelled());
  // Notify from another thread wakes a blocked Wait.
  std::thread notifier([&] { waker->Notify(); });
  EXPECT_TRUE(waker->Wait(kTimeout));
  notifier.join();
}

}  // namespace
}  // namespace mcserve::engine
