#include "kernels/cpu/thread_pool.h"

#include "base/thread_name.h"
#include "kernels/cpu/scratch.h"

#include <cblas.h>

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <latch>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#define MCSERVE_CPU_RELAX() _mm_pause()
#else
#define MCSERVE_CPU_RELAX() std::this_thread::yield()
#endif

// OpenBLAS (pthreads build): joins its worker threads; exported, not declared in cblas.h.
extern "C" int blas_thread_shutdown_(void);

namespace mcserve::kernels::cpu {
namespace {

// How long a worker spins for the next loop before sleeping. Timed, not counted: 2,000 pauses (the
// count this replaced, ~100 µs where it was set) take 30–35 µs on an Intel Xeon with AVX-512 FP16,
// and there a worker fell asleep, and cost a futex wake-up, in the serial gaps of an SSC decode step.
constexpr std::chrono::microseconds kSpinTime{100};
constexpr int kPausesPerClockRead = 32;  // pauses between reads of the clock while spinning
// The caller's spin on the last chunks, in pauses, before it yields to a descheduled worker.
constexpr int kSpinIterations = 2000;
// A lane word's top half: the loop's generation mod 2^32 (Lane).
uint64_t GenerationTag(uint64_t generation) { return (generation & 0xffffffffu) << 32; }

// Block `index` of `parts` equal blocks of [0, n).
std::pair<int64_t, int64_t> Block(int64_t n, int parts, int index) {
  int64_t base = n / parts, extra = n % parts;
  int64_t begin = index * base + std::min<int64_t>(index, extra);
  return {begin, begin + base + (index < extra ? 1 : 0)};
}

// The CPUs to pin the num_threads − 1 workers to when MCSERVE_PIN_THREADS=1: the 2nd, 3rd, ... of the
// CPUs this process may run on, leaving the first to the (unpinned) caller. Empty (no pinning) by
// default, or when there are fewer allowed CPUs than threads. Off by default because it measured
// slower in the Engine (0.95-0.97x, bench/README.md): a pinned worker cannot move away from a core
// that a front-end or consumer thread lands on; it gains 1-2% in the bare decode loop.
std::vector<int> WorkerCpus(int num_threads) {
  const char* env = std::getenv("MCSERVE_PIN_THREADS");
  if (env == nullptr || std::strcmp(env, "1") != 0) return {};
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return {};
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  }
  if (static_cast<int>(cpus.size()) < num_threads) return {};
  return std::vector<int>(cpus.begin() + 1, cpus.begin() + num_threads);
}

// Pins the calling thread to one CPU (best effort: a failure leaves it unpinned).
void PinToCpu(int cpu) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
}

}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  // Our pool owns the cores: OpenBLAS runs single-threaded inside our loops. Its own threads, left
  // at the default, spin between calls (and from start-up) and slow every other op down; the one it
  // started when it was loaded keeps waking to yield even at one thread, so it is stopped too (the
  // fork handler OpenBLAS installs calls the same; a later call that wants threads restarts them).
  openblas_set_num_threads(1);
  blas_thread_shutdown_();
  if (num_threads <= 0) num_threads = std::max(1u, std::thread::hardware_concurrency());
  lanes_ = std::make_unique<Lane[]>(num_threads);
  if (LoopTiming::Requested()) timing_ = std::make_unique<LoopTiming>();
  // Workers are running, their per-thread scratch made, when the constructor returns: nothing a
  // thread does on its first start lands inside a later loop.
  std::latch started(num_threads - 1);
  const std::vector<int> cpus = WorkerCpus(num_threads);
  for (int i = 0; i + 1 < num_threads; ++i) {
    const int cpu = cpus.empty() ? -1 : cpus[i];
    workers_.emplace_back([this, &started, cpu, lane = i + 1] {
      NameThisThread("mcserve-pool");
      if (cpu >= 0) PinToCpu(cpu);
      ThreadScratch(0), OpScratch(0), ProjectionInputScratch(0);
      started.count_down();
      WorkerLoop(lane);
    });
  }
  started.wait();
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
  }
  work_cv_.notify_all();
  for (auto& w : workers_) w.join();
  if (timing_ != nullptr) timing_->Print();
}

uint64_t ThreadPool::AwaitWork(uint64_t seen) {
  const auto deadline = std::chrono::steady_clock::now() + kSpinTime;
  for (int spin = 1;; ++spin) {
    const uint64_t g = job_.generation.load(std::memory_order_acquire);
    if (g != seen || stop_.load(std::memory_order_relaxed)) return g;
    MCSERVE_CPU_RELAX();
    if (spin % kPausesPerClockRead == 0 && std::chrono::steady_clock::now() >= deadline) break;
  }
  // The worker counts itself asleep (seq_cst) before it re-reads the generation (seq_cst); the caller
  // stores the generation before it reads sleepers_. One of the two sees the other: either the caller
  // notifies (taking mu_, so not before this worker waits) or the predicate sees the new loop.
  std::unique_lock<std::mutex> lock(mu_);
  sleepers_.fetch_add(1);
  work_cv_.wait(lock, [&] { return job_.generation.load() != seen || stop_.load(); });
  sleepers_.fetch_sub(1);
  return job_.generation.load(std::memory_order_acquire);
}

int64_t ThreadPool::Lane::Claim(uint64_t generation) {
  const uint64_t tag = GenerationTag(generation);
  uint64_t word = claim.load(std::memory_order_acquire);
  // word = tag | end << 16 | next chunk: everything the claim needs is in the one word.
  while ((word & ~uint64_t{0xffffffffu}) == tag && (word & 0xffffu) < ((word >> 16) & 0xffffu)) {
    if (claim.compare_exchange_weak(word, word + 1, std::memory_order_acq_rel, std::memory_order_acquire)) {
      return static_cast<int64_t>(word & 0xffffu);
    }
  }
  return -1;
}

void ThreadPool::RunChunks(uint64_t generation, int own_lane) {
  const int lanes = num_threads();
  int64_t finished = 0;
  const uint64_t start = timing_ != nullptr ? LoopTiming::Now() : 0;
  for (int k = 0; k < lanes; ++k) {
    Lane& lane = lanes_[(own_lane + k) % lanes];
    for (int64_t c = lane.Claim(generation); c >= 0; c = lane.Claim(generation)) {
      auto [begin, end] = Block(job_.n, static_cast<int>(job_.chunks), static_cast<int>(c));
      if (begin < end) (*job_.fn)(begin, end);
      ++finished;
    }
  }
  if (timing_ != nullptr && (own_lane == 0 || finished > 0)) timing_->Ran(own_lane != 0, start, LoopTiming::Now());
  // Once per thread and loop, not per chunk: the caller waits on this line.
  if (finished > 0) done_.fetch_add(finished, std::memory_order_acq_rel);
}

void ThreadPool::WorkerLoop(int lane) {
  uint64_t seen = 0;
  while (true) {
    seen = AwaitWork(seen);
    if (stop_.load()) return;
    RunChunks(seen, lane);
  }
}

void ThreadPool::ParallelFor(int64_t n, absl::FunctionRef<void(int64_t, int64_t)> fn, int chunks_per_thread) {
  if (n <= 0) return;
  if (workers_.empty() || n == 1) {
    fn(0, n);
    return;
  }
  job_.fn.emplace(fn);
  job_.n = n;
  const int64_t chunks = std::min<int64_t>({n, int64_t{num_threads()} * std::max(1, chunks_per_thread), 0xffff});
  job_.chunks = chunks;
  done_.store(0, std::memory_order_relaxed);
  const uint64_t generation = job_.generation.load(std::memory_order_relaxed) + 1;
  const uint64_t tag = GenerationTag(generation);
  for (int i = 0; i < num_threads(); ++i) {
    auto [first, end] = Block(chunks, num_threads(), i);  // lane i's chunks: [first, end)
    lanes_[i].claim.store(tag | static_cast<uint64_t>(end) << 16 | static_cast<uint64_t>(first),
                          std::memory_order_release);
  }
  if (timing_ != nullptr) timing_->Publishing();
  // No lock to publish: see AwaitWork for why a worker going to sleep cannot miss this loop.
  job_.generation.store(generation);
  if (sleepers_.load() > 0) {
    std::lock_guard<std::mutex> lock(mu_);  // every counted sleeper is in its wait (or past it)
    work_cv_.notify_all();
  }
  RunChunks(generation, /*own_lane=*/0);
  const uint64_t wait_start = timing_ != nullptr ? LoopTiming::Now() : 0;
  // Only chunks a worker claimed and is still running are left.
  for (int spin = 0; done_.load(std::memory_order_acquire) != chunks; ++spin) {
    if (spin < kSpinIterations) {
      MCSERVE_CPU_RELAX();
    } else {
      std::this_thread::yield();  // that worker was descheduled
    }
  }
  if (timing_ != nullptr) timing_->Waited(wait_start, LoopTiming::Now());
}

void ParallelFor(ThreadPool* pool, int64_t n, absl::FunctionRef<void(int64_t, int64_t)> fn,
                 int chunks_per_thread) {
  if (pool == nullptr || n <= 1) {
    if (n > 0) fn(0, n);
    return;
  }
  pool->ParallelFor(n, fn, chunks_per_thread);
}

}  // namespace mcserve::kernels::cpu
