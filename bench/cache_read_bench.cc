// Read-rate ceiling for weight-streaming decode: reads a buffer of a given size (e.g. the bytes of
// weights one decode step reads) over and over with AVX2 loads, split across T threads, and prints
// one JSON line of GB/s per (size, threads). Used by bench/cpu_peer_bench.py:
//     cache_read_bench --bytes 37298176,18649088 --threads 1,2 [--min-seconds 0.3] [--trials 5]
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace {

struct Args {
  std::vector<int64_t> bytes;
  std::vector<int> threads;
  double min_seconds = 0.3;
  int trials = 5;
};

bool ParseList(const std::string& text, std::vector<int64_t>* out) {
  for (absl::string_view piece : absl::StrSplit(text, ',')) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(piece, &v) || v <= 0) return false;
    out->push_back(v);
  }
  return !out->empty();
}

bool ParseArgs(int argc, char** argv, Args* a) {
  std::vector<int64_t> threads;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i], value = argv[i + 1];
    bool ok = key == "--bytes"         ? ParseList(value, &a->bytes)
              : key == "--threads"     ? ParseList(value, &threads)
              : key == "--min-seconds" ? absl::SimpleAtod(value, &a->min_seconds)
              : key == "--trials"      ? absl::SimpleAtoi(value, &a->trials)
                                       : false;
    if (!ok) return false;
  }
  for (int64_t t : threads) a->threads.push_back(static_cast<int>(t));
  if (a->threads.empty()) a->threads = {1};
  return !a->bytes.empty() && a->trials > 0;
}

// Sums `floats` floats (a multiple of 32, 32-byte aligned) `passes` times; four independent AVX2
// accumulators keep several loads in flight. The sum is returned so the reads are not elided.
__attribute__((target("avx2"))) float ReadSlice(const float* data, int64_t floats, int passes) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (int p = 0; p < passes; ++p) {
    for (int64_t i = 0; i < floats; i += 32) {
      a0 = _mm256_add_ps(a0, _mm256_load_ps(data + i));
      a1 = _mm256_add_ps(a1, _mm256_load_ps(data + i + 8));
      a2 = _mm256_add_ps(a2, _mm256_load_ps(data + i + 16));
      a3 = _mm256_add_ps(a3, _mm256_load_ps(data + i + 24));
    }
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  float sum = 0;
  for (float v : lanes) sum += v;
  return sum;
}

// Seconds for `passes` reads of the whole buffer, each of `threads` threads reading its own slice.
double TimePasses(const float* data, int64_t floats, int threads, int passes, float* checksum) {
  const int64_t slice = (floats / threads) / 32 * 32;
  std::vector<float> sums(threads);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> workers;
  for (int t = 1; t < threads; ++t) {
    workers.emplace_back([&, t] { sums[t] = ReadSlice(data + t * slice, slice, passes); });
  }
  sums[0] = ReadSlice(data, slice, passes);
  for (auto& w : workers) w.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (float s : sums) *checksum += s;
  return seconds;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (!ParseArgs(argc, argv, &args)) {
    std::fprintf(stderr,
                 "usage: cache_read_bench --bytes N[,N...] [--threads T[,T...]] [--min-seconds S] [--trials K]\n");
    return 2;
  }
  float checksum = 0;
  std::printf("{\"probe\": \"cache_read\", \"results\": [");
  const char* sep = "";
  for (int64_t bytes : args.bytes) {
    const int64_t floats = std::max<int64_t>(bytes / 4 / 256 * 256, 256);
    float* data = static_cast<float*>(std::aligned_alloc(64, floats * sizeof(float)));
    for (int64_t i = 0; i < floats; ++i) data[i] = static_cast<float>(i % 7) * 0.25f;
    for (int threads : args.threads) {
      // Calibrate passes so one trial lasts about min_seconds, then keep the fastest trial.
      int passes = 1;
      while (TimePasses(data, floats, threads, passes, &checksum) < args.min_seconds / 4 && passes < (1 << 24))
        passes *= 2;
      passes *= 4;
      double best = 1e30;
      for (int k = 0; k < args.trials; ++k) best = std::min(best, TimePasses(data, floats, threads, passes, &checksum));
      const int64_t slice_bytes = (floats / threads) / 32 * 32 * threads * 4;
      std::printf("%s{\"bytes\": %lld, \"threads\": %d, \"passes\": %d, \"gb_per_s\": %.2f}", sep,
                  static_cast<long long>(slice_bytes), threads, passes, slice_bytes * 1e-9 * passes / best);
      sep = ", ";
    }
    std::free(data);
  }
  std::printf("], \"checksum\": %g}\n", static_cast<double>(checksum));
  return 0;
}
