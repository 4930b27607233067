// OutputChannel: bounded token events, the final event always fits, OUT_OF_RANGE after it,
// cancellation, and the engine loop wake-up when a consumer frees room or cancels.
#include "engine/serving/output_channel.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <thread>

#include "gtest/gtest.h"

namespace mcserve::engine {
namespace {

constexpr absl::Duration kTimeout = absl::Seconds(60);

TEST(OutputChannelTest, BoundedFinalAlwaysFitsThenOutOfRange) {
  auto waker = std::make_shared<LoopWaker>();
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
  OutputChannel ch(4, std::make_shared<LoopWaker>());
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

// Popping from a full channel and cancelling wake the engine loop; popping with room to spare doesn't.
TEST(OutputChannelTest, ConsumerWakesTheEngineLoopWhenItFreesRoomOrCancels) {
  auto waker = std::make_shared<LoopWaker>();
  OutputChannel ch(2, waker);
  OutputEvent e;
  e.token_id = 3;
  ASSERT_TRUE(ch.Push(e));
  ASSERT_TRUE(ch.Next(kTimeout).ok());  // had room: no wake-up needed
  EXPECT_FALSE(waker->Wait(absl::ZeroDuration()));
  ASSERT_TRUE(ch.Push(e));
  ASSERT_TRUE(ch.Push(e));
  ASSERT_TRUE(ch.Next(kTimeout).ok());  // was full: the engine loop may schedule it again
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

// TryNext never blocks: nullopt while empty, events in order, and nothing after the final one.
TEST(OutputChannelTest, TryNextIsNonBlocking) {
  auto waker = std::make_shared<LoopWaker>();
  OutputChannel ch(1, waker);
  EXPECT_FALSE(ch.TryNext().has_value());
  OutputEvent e;
  e.token_id = 7;
  ASSERT_TRUE(ch.Push(e));
  waker->Wait(absl::ZeroDuration());  // clear any pending wake-up
  std::optional<OutputEvent> got = ch.TryNext();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->token_id, 7);
  EXPECT_TRUE(waker->Wait(absl::ZeroDuration())) << "taking from a full channel wakes the engine loop";
  OutputEvent fin;
  fin.finish = FinishReason::kStop;
  ch.Finish(fin);
  EXPECT_EQ(ch.TryNext()->finish, FinishReason::kStop);
  EXPECT_FALSE(ch.TryNext().has_value());
}

// The listener runs on every Push and Finish, once at once for events already queued, and never
// after it was removed.
TEST(OutputChannelTest, ListenerIsCalledOnEveryEventUntilRemoved) {
  OutputChannel ch(8, std::make_shared<LoopWaker>());
  OutputEvent e;
  e.token_id = 1;
  ASSERT_TRUE(ch.Push(e));
  int calls = 0;
  ch.SetListener([&calls] { ++calls; });
  EXPECT_EQ(calls, 1) << "an event was already queued";
  ASSERT_TRUE(ch.Push(e));
  EXPECT_EQ(calls, 2);
  ch.SetListener(nullptr);
  ASSERT_TRUE(ch.Push(e));
  EXPECT_EQ(calls, 2);
  int later = 0;
  ch.SetListener([&later] { ++later; });
  EXPECT_EQ(later, 1);
  OutputEvent fin;
  fin.finish = FinishReason::kLength;
  ch.Finish(fin);
  EXPECT_EQ(later, 2);
  int empty = 0;
  OutputChannel idle(2, nullptr);
  idle.SetListener([&empty] { ++empty; });
  EXPECT_EQ(empty, 0) << "nothing queued: no call";
}

// PushQuietly queues without waking anyone; WakeConsumer then wakes once for all of them (listener and a
// blocked Next), and again only after another quiet push. Finish wakes on its own.
TEST(OutputChannelTest, QuietPushesWakeTheConsumerOnceOnWakeConsumer) {
  OutputChannel ch(8, std::make_shared<LoopWaker>());
  int calls = 0;
  ch.SetListener([&calls] { ++calls; });
  OutputEvent e;
  e.token_id = 7;
  ASSERT_TRUE(ch.PushQuietly(e));
  ASSERT_TRUE(ch.PushQuietly(e));
  EXPECT_EQ(calls, 0) << "a quiet push called the listener";
  EXPECT_EQ(ch.size(), 2u);
  ch.WakeConsumer();
  EXPECT_EQ(calls, 1);
  ch.WakeConsumer();
  EXPECT_EQ(calls, 1) << "nothing new since the last wake";
  ASSERT_TRUE(ch.Next(kTimeout).ok());
  ASSERT_TRUE(ch.Next(kTimeout).ok());

  ch.SetListener(nullptr);
  std::atomic<bool> got{false};
  std::thread consumer([&] {
    absl::StatusOr<OutputEvent> next = ch.Next(kTimeout);
    got = next.ok() && next->token_id == 7;
  });
  ASSERT_TRUE(ch.PushQuietly(e));
  ch.WakeConsumer();
  consumer.join();
  EXPECT_TRUE(got);

  ch.SetListener([&calls] { ++calls; });
  ASSERT_TRUE(ch.PushQuietly(e));  // queued: SetListener above did not see it, the next wake does
  OutputEvent fin;
  fin.finish = FinishReason::kLength;
  ch.Finish(fin);
  EXPECT_EQ(calls, 2);
  ch.WakeConsumer();
  EXPECT_EQ(calls, 2) << "Finish had already woken the consumer for every event";
  EXPECT_FALSE(ch.PushQuietly(e)) << "closed";
}

// SetListener(nullptr) waits for a running call of the old listener, so what it captured may be
// freed right after.
TEST(OutputChannelTest, RemovingTheListenerWaitsForARunningCall) {
  OutputChannel ch(8, std::make_shared<LoopWaker>());
  std::atomic<bool> inside{false}, release{false}, finished{false};
  ch.SetListener([&] {
    inside = true;
    while (!release) std::this_thread::yield();
    finished = true;
  });
  std::thread producer([&] {
    OutputEvent e;
    e.token_id = 1;
    ch.Push(e);
  });
  while (!inside) std::this_thread::yield();
  std::atomic<bool> removed{false};
  std::thread remover([&] {
    ch.SetListener(nullptr);
    removed = true;
    EXPECT_TRUE(finished) << "SetListener(nullptr) returned before the running call ended";
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(removed) << "SetListener(nullptr) did not wait for the running call";
  release = true;
  remover.join();
  EXPECT_TRUE(removed);
  producer.join();
}

}  // namespace
}  // namespace mcserve::engine
