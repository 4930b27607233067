// What one cpu::ThreadPool::ParallelFor hand-off costs: 2-thread loops over 256 indices with no work
// and with a little per chunk, the way a batch-1 decode step makes ~109 of them. Google Benchmark;
// see bench/README.md ("Batch 1: ... the gaps between the pool's loops").
#include <atomic>
#include <cstdint>

#include "benchmark/benchmark.h"
#include "kernels/cpu/thread_pool.h"

namespace {

void BM_ParallelFor(benchmark::State& state) {
  mcserve::kernels::cpu::ThreadPool pool(2);
  const int64_t work = state.range(0);  // multiply-adds per index
  std::atomic<int64_t> sink{0};
  for (auto _ : state) {
    pool.ParallelFor(256, [&](int64_t begin, int64_t end) {
      int64_t s = 0;
      for (int64_t i = begin; i < end; ++i) {
        for (int64_t w = 0; w < work; ++w) s += i * w;
      }
      sink.fetch_add(s, std::memory_order_relaxed);
    });
  }
  benchmark::DoNotOptimize(sink.load());
}
BENCHMARK(BM_ParallelFor)->Arg(0)->Arg(8)->Arg(64)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
