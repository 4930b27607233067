#include "kernels/cpu/loop_timing.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace mcserve::kernels::cpu {

bool LoopTiming::Requested() {
  const char* env = std::getenv("MCSERVE_POOL_TIMING");
  return env != nullptr && std::strcmp(env, "1") == 0;
}

uint64_t LoopTiming::Now() {
#if defined(__x86_64__)
  return __rdtsc();
#else
  return static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
#endif
}

void LoopTiming::Publishing() {
  const uint64_t now = Now();
  if (last_end_ != 0) serial_ += now - last_end_;
  ++loops_;
  published_.store(now, std::memory_order_relaxed);
}

void LoopTiming::Ran(bool worker, uint64_t start, uint64_t end) {
  if (!worker) {
    caller_chunks_ += end - start;
    return;
  }
  worker_runs_.fetch_add(1, std::memory_order_relaxed);
  worker_lag_.fetch_add(start - published_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  worker_chunks_.fetch_add(end - start, std::memory_order_relaxed);
}

void LoopTiming::Waited(uint64_t start, uint64_t end) {
  last_end_ = end;
  const uint64_t wait = end - start;
  caller_wait_ += wait;
  if (wait > kLongWaitTicks) {
    ++long_waits_;
    long_wait_ticks_ += wait;
  }
}

void LoopTiming::Print() const {
  if (loops_ == 0) return;
  const double loops = static_cast<double>(loops_);
  const double runs = std::max<double>(1.0, static_cast<double>(worker_runs_.load()));
  std::fprintf(stderr,
               "mcserve pool timing: %llu loops (%llu worker runs); TSC ticks per loop: serial between loops "
               "%.0f, caller's chunks %.0f, caller waiting %.0f (%.0f of it in %llu waits over %llu ticks); per "
               "worker run: start lag %.0f, chunks %.0f\n",
               static_cast<unsigned long long>(loops_), static_cast<unsigned long long>(worker_runs_.load()),
               serial_ / loops, caller_chunks_ / loops, caller_wait_ / loops, long_wait_ticks_ / loops,
               static_cast<unsigned long long>(long_waits_), static_cast<unsigned long long>(kLongWaitTicks),
               worker_lag_.load() / runs, worker_chunks_.load() / runs);
}

}  // namespace mcserve::kernels::cpu
