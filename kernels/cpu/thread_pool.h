// A fixed pool of worker threads for the CPU backend's data-parallel loops. Workers spin briefly
// after each loop before sleeping, so the back-to-back small loops of a decode step do not pay a
// futex wake-up each (the decode targets of docs/architecture.md); an idle pool sleeps.
// A loop is cut into a few chunks per thread. Each thread first claims the chunks of its own lane (a
// counter on its own cache line, so claiming them moves no line between cores), then takes what is
// left in the other lanes: when the machine is loaded and a worker is not running, the caller does
// its share instead of spinning on it, and a worker that started late is helped with its tail.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "absl/functional/function_ref.h"
#include "kernels/cpu/loop_timing.h"

namespace mcserve::kernels::cpu {

// How many chunks per thread ParallelFor cuts a loop into. More chunks let the threads finish closer
// together when one starts late (a batch-1 GEMV's loop is ~10 µs; the caller waited ~1.5 µs a loop
// for the worker's last chunk); each chunk start costs a kernel its warm-up (a GEMM tile's prefetch).
// With owner-first lanes, 8 against 2 gained 1.12x at F32 batch 1 and 4 against 8 tied; 4 everywhere
// against 2 cost batch 32 (the GEMM) a few percent (bench/README.md, "Owner-first lanes").
inline constexpr int kCoarseChunksPerThread = 2;  // the default
// The memory-bound GEMV at m ≤ 8: one chunk, so each thread reads one long contiguous range of the
// weights (cut into parts side by side by the GEMV itself), the same range every token. Against 4 (when
// the GEMV still read 8 rows side by side, 4 had won), on an AMD EPYC Zen 5 VM at 2 threads: 1.01-1.20x
// over batch 1-8, F32 and BF16, from L3 and DRAM; 2 chunks 0.98-1.12x (bench/README.md). A worker
// descheduled mid-chunk now holds up the loop by up to its whole half.
inline constexpr int kGemvChunksPerThread = 1;

class ThreadPool {
 public:
  // Starts `num_threads - 1` workers; the calling thread is the last participant.
  // num_threads <= 0 means std::thread::hardware_concurrency().
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs fn(begin, end) over a partition of [0, n) into contiguous blocks and waits for all. Which
  // thread runs which block is not fixed. Not reentrant: call from one thread at a time (the
  // engine's engine loop thread).
  void ParallelFor(int64_t n, absl::FunctionRef<void(int64_t, int64_t)> fn,
                   int chunks_per_thread = kCoarseChunksPerThread);

 private:
  // Runs worker `lane` (1-based: lane 0 is the caller's) until the pool stops.
  void WorkerLoop(int lane);
  // Waits until the job's generation differs from `seen` or the pool stops; returns the new generation.
  uint64_t AwaitWork(uint64_t seen);
  // Claims and runs chunks of loop `generation`, its own lane's first, then the others', until none
  // is left (or a newer loop started); then counts them done.
  void RunChunks(uint64_t generation, int own_lane);

  // The current loop: what a worker reads once it sees a new generation, on one cache line with it.
  // Written by the caller before it publishes the generation; a chunk claimed means they are the
  // loop's until done_ reaches chunks.
  struct alignas(64) Job {
    std::atomic<uint64_t> generation{0};  // bumped once per ParallelFor (seq_cst): wakes the workers
    std::optional<absl::FunctionRef<void(int64_t, int64_t)>> fn;
    int64_t n = 0, chunks = 0;
  };
  // One participant's run of the current loop's chunks: (generation mod 2^32) << 32 | end << 16 |
  // next chunk, claimed by compare-and-swap, so a thread that wakes after its loop has moved on
  // claims nothing. Its own cache line: its owner's claims stay in its owner's cache.
  struct alignas(64) Lane {
    std::atomic<uint64_t> claim{0};
    // The next unclaimed chunk of loop `generation` in this lane, or -1.
    int64_t Claim(uint64_t generation);
  };

  std::vector<std::thread> workers_;
  Job job_;
  std::unique_ptr<Lane[]> lanes_;  // [num_threads]: lane 0 the caller's, lane i worker i's
  alignas(64) std::atomic<int64_t> done_{0};  // chunks finished in the current loop
  alignas(64) std::mutex mu_;                 // held by a worker from counting itself asleep to waiting
  std::condition_variable work_cv_;
  std::atomic<int> sleepers_{0};              // workers asleep (or about to be) on work_cv_
  std::atomic<bool> stop_{false};
  std::unique_ptr<LoopTiming> timing_;  // set when LoopTiming::Requested() at construction
};

// Runs fn over [0, n) on `pool`, or inline when pool is null or n is small.
void ParallelFor(ThreadPool* pool, int64_t n, absl::FunctionRef<void(int64_t, int64_t)> fn,
                 int chunks_per_thread = kCoarseChunksPerThread);

}  // namespace mcserve::kernels::cpu
