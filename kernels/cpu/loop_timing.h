// Where a thread pool's loops spend their time, for measuring the pool on a noisy shared machine, where
// tokens/s swing more than a change moves them: on when MCSERVE_POOL_TIMING=1 at pool construction
// (bench/README.md), else the pool never calls it. Counts time-stamp-counter ticks (x86; elsewhere
// steady-clock ticks).
#pragma once

#include <atomic>
#include <cstdint>

namespace mcserve::kernels::cpu {

class LoopTiming {
 public:
  // A caller wait longer than this is counted apart as well: at 2-4 GHz it is 25-50 µs, past any batch-1
  // loop's imbalance, so mostly a worker taken off its core (a shared VM's neighbours, the scheduler).
  // On such machines those few waits can make most of the mean (bench/README.md).
  static constexpr uint64_t kLongWaitTicks = 100'000;

  // Whether MCSERVE_POOL_TIMING=1 asks for it. Any thread.
  static bool Requested();
  // The time-stamp counter now. Any thread.
  static uint64_t Now();

  // The caller is about to publish a loop: counts the serial time since the last loop ended. Caller only.
  void Publishing();
  // A participant ran chunks of the current loop from `start` to `end` (Now()); `worker` for a worker,
  // which also counts how late it started. Caller or worker.
  void Ran(bool worker, uint64_t start, uint64_t end);
  // The caller waited for the workers' chunks from `start` to `end` (Now()), and the loop ended. Caller only.
  void Waited(uint64_t start, uint64_t end);
  // One line on stderr: loops and the average ticks per loop of each part, with the long waits' share of
  // the caller's. At pool destruction.
  void Print() const;

 private:
  std::atomic<uint64_t> published_{0};  // Now() at the current loop's publication
  uint64_t last_end_ = 0;               // Now() when the previous loop ended (caller only)
  uint64_t loops_ = 0, serial_ = 0, caller_chunks_ = 0, caller_wait_ = 0;  // caller only
  uint64_t long_waits_ = 0, long_wait_ticks_ = 0;  // caller only: the waits over kLongWaitTicks
  std::atomic<uint64_t> worker_runs_{0}, worker_lag_{0}, worker_chunks_{0};
};

}  // namespace mcserve::kernels::cpu
