// cpu::ThreadPool / cpu::ParallelFor: every index covered exactly once by contiguous blocks, for many
// sizes and thread counts, and the pool is reusable many times.
#include "kernels/cpu/thread_pool.h"

#include <sched.h>

#include <atomic>
#include <cstdlib>
#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/unit/thread_names.h"

namespace mcserve::kernels::cpu {
namespace {

// Runs ParallelFor over [0, n) and checks each index is visited exactly once with begin < end.
void ExpectCoversOnce(ThreadPool* pool, int64_t n, int chunks_per_thread = kCoarseChunksPerThread) {
  std::vector<std::atomic<int>> hits(n);
  std::atomic<int> empty_calls{0};
  ParallelFor(
      pool, n,
      [&](int64_t begin, int64_t end) {
        if (begin >= end || begin < 0 || end > n) {
          empty_calls++;
          return;
        }
        for (int64_t i = begin; i < end; ++i) hits[i]++;
      },
      chunks_per_thread);
  EXPECT_EQ(empty_calls.load(), 0) << "n=" << n;
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "index " << i << " of " << n;
}

TEST(ThreadPoolTest, CoversEachIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 4, 7}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.num_threads(), threads);
    for (int64_t n : {0, 1, 2, 3, 5, 6, 7, 8, 13, 64, 1000, 100003}) {
      for (int chunks : {1, kGemvChunksPerThread, kCoarseChunksPerThread, 4, 16}) ExpectCoversOnce(&pool, n, chunks);
    }
  }
}

TEST(ThreadPoolTest, NullPoolRunsInline) {
  for (int64_t n : {0, 1, 17}) ExpectCoversOnce(nullptr, n);
  int calls = 0;
  ParallelFor(nullptr, 10, [&](int64_t begin, int64_t end) {
    ++calls;
    EXPECT_EQ(begin, 0);
    EXPECT_EQ(end, 10);
  });
  EXPECT_EQ(calls, 1);
}

TEST(ThreadPoolTest, WorkersAreNamedForTopAndPerf) {
  const int before = mcserve::testing::CountThreadsNamed("mcserve-pool");
  {
    ThreadPool pool(3);
    EXPECT_EQ(mcserve::testing::CountThreadsNamed("mcserve-pool"), before + 2);  // the caller is the third
  }
  EXPECT_EQ(mcserve::testing::CountThreadsNamed("mcserve-pool"), before);
}

TEST(ThreadPoolTest, WorkRunsOnSeveralThreads) {
  ThreadPool pool(3);
  std::mutex mu;
  std::set<std::thread::id> ids;
  // Chunks slow enough that the workers wake before the caller has claimed them all (the caller
  // takes every chunk of a loop that ends before they wake).
  ParallelFor(&pool, 3000, [&](int64_t, int64_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::lock_guard<std::mutex> lock(mu);
    ids.insert(std::this_thread::get_id());
  });
  EXPECT_GE(ids.size(), 2u);
}

TEST(ThreadPoolTest, TheCallerTakesOverAStalledWorkersShare) {
  // The worker stalls in every block it gets (as when the machine is loaded and it is not running):
  // the caller claims the remaining blocks itself, well over the half a fixed split would give it.
  ThreadPool pool(2);
  const int64_t n = 64;
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<int64_t> by_caller{0}, total{0};
  ParallelFor(&pool, n, [&](int64_t begin, int64_t end) {
    if (std::this_thread::get_id() != caller) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    if (std::this_thread::get_id() == caller) by_caller += end - begin;
    total += end - begin;
  });
  EXPECT_EQ(total.load(), n);
  EXPECT_GT(by_caller.load(), n / 2);
}

TEST(ThreadPoolTest, AWorkerTakesOverTheCallersTailWhenTheCallerIsSlow) {
  // Each thread claims its own lane's chunks first, then the others': a caller slowed in every chunk
  // it runs (descheduled, or a slower core) leaves the rest of its lane to the worker.
  ThreadPool pool(2);
  const int64_t n = 64;
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<int64_t> by_worker{0}, total{0};
  ParallelFor(
      &pool, n,
      [&](int64_t begin, int64_t end) {
        if (std::this_thread::get_id() == caller) std::this_thread::sleep_for(std::chrono::milliseconds(200));
        if (std::this_thread::get_id() != caller) by_worker += end - begin;
        total += end - begin;
      },
      /*chunks_per_thread=*/4);  // several chunks in the caller's lane, to leave to the worker
  EXPECT_EQ(total.load(), n);
  EXPECT_GT(by_worker.load(), n / 2);
}

TEST(ThreadPoolTest, ReusableManyTimes) {
  ThreadPool pool(2);
  int64_t total = 0;
  for (int iter = 0; iter < 5000; ++iter) {
    std::atomic<int64_t> sum{0};
    const int64_t n = 1 + iter % 37;
    pool.ParallelFor(n, [&](int64_t begin, int64_t end) {
      int64_t s = 0;
      for (int64_t i = begin; i < end; ++i) s += i + 1;
      sum += s;
    });
    ASSERT_EQ(sum.load(), n * (n + 1) / 2) << "iteration " << iter;
    total += sum.load();
  }
  EXPECT_GT(total, 0);
}

TEST(ThreadPoolTest, ManyPoolsCreatedAndDestroyed) {
  for (int i = 0; i < 50; ++i) {
    auto pool = std::make_unique<ThreadPool>(1 + i % 4);
    ExpectCoversOnce(pool.get(), 9);
  }
}

// The CPUs the calling thread may run on.
std::vector<int> AllowedCpus() {
  cpu_set_t set;
  EXPECT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

// The allowed CPUs of every pool thread other than the caller that ran a chunk of a slow loop.
std::set<std::vector<int>> WorkerAffinities(ThreadPool& pool) {
  const std::thread::id caller = std::this_thread::get_id();
  std::mutex mu;
  std::set<std::vector<int>> seen;
  pool.ParallelFor(64, [&](int64_t, int64_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    if (std::this_thread::get_id() == caller) return;
    std::vector<int> cpus = AllowedCpus();
    std::lock_guard<std::mutex> lock(mu);
    seen.insert(std::move(cpus));
  });
  return seen;
}

TEST(ThreadPoolTest, WithPinningWorkersArePinnedToDistinctCpusTheCallerIsNot) {
  const std::vector<int> allowed = AllowedCpus();
  ASSERT_EQ(setenv("MCSERVE_PIN_THREADS", "1", 1), 0);
  ThreadPool pool(2);
  unsetenv("MCSERVE_PIN_THREADS");
  const std::set<std::vector<int>> workers = WorkerAffinities(pool);
  ASSERT_EQ(workers.size(), 1u);  // one worker, and it ran some chunks
  if (allowed.size() >= 2) {
    EXPECT_EQ(*workers.begin(), std::vector<int>{allowed[1]});  // the first allowed CPU is left free
  } else {
    EXPECT_EQ(*workers.begin(), allowed);  // one CPU: nothing to pin to
  }
  EXPECT_EQ(AllowedCpus(), allowed);  // the caller is never pinned
}

TEST(ThreadPoolTest, NoPinningByDefaultOrWithMoreThreadsThanCpus) {
  const std::vector<int> allowed = AllowedCpus();
  {
    ThreadPool pool(2);
    for (const std::vector<int>& w : WorkerAffinities(pool)) EXPECT_EQ(w, allowed);
  }
  ASSERT_EQ(setenv("MCSERVE_PIN_THREADS", "1", 1), 0);
  {
    ThreadPool pool(static_cast<int>(allowed.size()) + 1);
    for (const std::vector<int>& w : WorkerAffinities(pool)) EXPECT_EQ(w, allowed);
  }
  unsetenv("MCSERVE_PIN_THREADS");
}

TEST(ThreadPoolTest, DefaultSizeIsAtLeastOne) {
  ThreadPool pool(0);
  EXPECT_GE(pool.num_threads(), 1);
  ExpectCoversOnce(&pool, 31);
}

}  // namespace
}  // namespace mcserve::kernels::cpu
