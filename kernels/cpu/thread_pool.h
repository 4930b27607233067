// A fixed pool of worker threads for the CPU backend's data-parallel loops.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace mcserve::kernels::cpu {

class ThreadPool {
 public:
  // Starts `num_threads - 1` workers; the calling thread is the last participant.
  // num_threads <= 0 means std::thread::hardware_concurrency().
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs fn(begin, end) over a partition of [0, n) into contiguous blocks and waits for all.
  // Not reentrant: call from one thread at a time (the engine's scheduler thread).
  void ParallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void WorkerLoop(int index);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  int64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
};

// Runs fn over [0, n) on `pool`, or inline when pool is null or n is small.
void ParallelFor(ThreadPool* pool, int64_t n, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace mcserve::kernels::cpu
