#include "kernels/cpu/thread_pool.h"

#include <cblas.h>

#include <algorithm>

#if defined(__x86_64__)
#include <immintrin.h>
#define MCSERVE_CPU_RELAX() _mm_pause()
#else
#define MCSERVE_CPU_RELAX() std::this_thread::yield()
#endif

namespace mcserve::kernels::cpu {
namespace {

// How long a worker spins for the next loop before sleeping (~100 µs of pause instructions).
constexpr int kSpinIterations = 2000;

// Block `index` of `parts` equal blocks of [0, n).
std::pair<int64_t, int64_t> Block(int64_t n, int parts, int index) {
  int64_t base = n / parts, extra = n % parts;
  int64_t begin = index * base + std::min<int64_t>(index, extra);
  return {begin, begin + base + (index < extra ? 1 : 0)};
}

}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  // Our pool owns the cores: OpenBLAS runs single-threaded inside our loops. Its own threads, left
  // at the default, spin between calls (and from start-up) and slow every other op down.
  openblas_set_num_threads(1);
  if (num_threads <= 0) num_threads = std::max(1u, std::thread::hardware_concurrency());
  for (int i = 0; i + 1 < num_threads; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
  }
  work_cv_.notify_all();
  for (auto& w : workers_) w.join();
}

uint64_t ThreadPool::AwaitWork(uint64_t seen) {
  for (int spin = 0; spin < kSpinIterations; ++spin) {
    const uint64_t g = generation_.load(std::memory_order_acquire);
    if (g != seen || stop_.load(std::memory_order_relaxed)) return g;
    MCSERVE_CPU_RELAX();
  }
  std::unique_lock<std::mutex> lock(mu_);
  sleepers_.fetch_add(1);
  work_cv_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen || stop_.load(); });
  sleepers_.fetch_sub(1);
  return generation_.load(std::memory_order_acquire);
}

void ThreadPool::WorkerLoop(int index) {
  uint64_t seen = 0;
  while (true) {
    seen = AwaitWork(seen);
    if (stop_.load()) return;
    auto [begin, end] = Block(n_, num_threads(), index);
    if (begin < end) (*fn_)(begin, end);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::ParallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (workers_.empty() || n == 1) {
    fn(0, n);
    return;
  }
  fn_ = &fn;
  n_ = n;
  pending_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
  {
    // Under the lock so that a worker between its predicate check and its wait cannot miss it.
    std::lock_guard<std::mutex> lock(mu_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  if (sleepers_.load() > 0) work_cv_.notify_all();
  auto [begin, end] = Block(n, num_threads(), num_threads() - 1);
  if (begin < end) fn(begin, end);
  for (int spin = 0; pending_.load(std::memory_order_acquire) != 0; ++spin) {
    if (spin < kSpinIterations) {
      MCSERVE_CPU_RELAX();
    } else {
      std::this_thread::yield();  // a worker was descheduled
    }
  }
}

void ParallelFor(ThreadPool* pool, int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  if (pool == nullptr || n <= 1) {
    if (n > 0) fn(0, n);
    return;
  }
  pool->ParallelFor(n, fn);
}

}  // namespace mcserve::kernels::cpu
