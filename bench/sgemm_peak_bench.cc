// sgemm ceiling: GFLOP/s of the OpenBLAS cblas_sgemm the kernels link, at M x K x N shapes (row-major
// A[M,K] times W[N,K] transposed: weights stored [out, in], as the kernels pass them) and OpenBLAS thread
// counts; one JSON line. Used by bench/cpu_peer_bench.py for the 1024^3 peak and the decode batches'
// (M = 8, 32) projection shapes:
//     sgemm_peak_bench --shapes 1024x1024x1024,32x256x768 --threads 1,2 [--min-seconds 0.3]
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "kernels/cpu/blas_core.h"

namespace {

struct Shape {
  int m, k, n;
};

struct Args {
  std::vector<Shape> shapes;
  std::vector<int> threads;
  double min_seconds = 0.3;
  int trials = 3;
};

bool ParseShape(absl::string_view text, Shape* s) {
  std::vector<absl::string_view> dims = absl::StrSplit(text, 'x');
  return dims.size() == 3 && absl::SimpleAtoi(dims[0], &s->m) && absl::SimpleAtoi(dims[1], &s->k) &&
         absl::SimpleAtoi(dims[2], &s->n) && s->m > 0 && s->k > 0 && s->n > 0;
}

bool ParseArgs(int argc, char** argv, Args* a) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i], value = argv[i + 1];
    if (key == "--shapes") {
      for (absl::string_view piece : absl::StrSplit(value, ',')) {
        Shape s;
        if (!ParseShape(piece, &s)) return false;
        a->shapes.push_back(s);
      }
    } else if (key == "--threads") {
      for (absl::string_view piece : absl::StrSplit(value, ',')) {
        int t = 0;
        if (!absl::SimpleAtoi(piece, &t) || t < 1) return false;
        a->threads.push_back(t);
      }
    } else if (!(key == "--min-seconds" && absl::SimpleAtod(value, &a->min_seconds)) &&
               !(key == "--trials" && absl::SimpleAtoi(value, &a->trials))) {
      return false;
    }
  }
  if (a->threads.empty()) a->threads = {1};
  return !a->shapes.empty() && a->trials > 0;
}

// Seconds for `reps` C = A * W^T products of shape s.
double TimeProducts(const Shape& s, const std::vector<float>& a, const std::vector<float>& b, std::vector<float>* c,
                    int reps) {
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < reps; ++r) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s.m, s.n, s.k, 1.0f, a.data(), s.k, b.data(), s.k, 0.0f,
                c->data(), s.n);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  mcserve::kernels::cpu::ReexecForBlasCore(argv);  // the kernels' OpenBLAS core, as the binaries get it
  Args args;
  if (!ParseArgs(argc, argv, &args)) {
    std::fprintf(stderr,
                 "usage: sgemm_peak_bench --shapes MxKxN[,...] [--threads T[,T...]] [--min-seconds S] [--trials K]\n");
    return 2;
  }
  std::printf("{\"probe\": \"sgemm\", \"blas_core\": \"%s\", \"results\": [",
              mcserve::kernels::cpu::LoadedBlasCore().c_str());
  const char* sep = "";
  for (const Shape& s : args.shapes) {
    std::vector<float> a(static_cast<size_t>(s.m) * s.k), b(static_cast<size_t>(s.k) * s.n),
        c(static_cast<size_t>(s.m) * s.n);
    for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 13) * 0.01f;
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 11) * 0.01f;
    for (int threads : args.threads) {
      openblas_set_num_threads(threads);
      int reps = 1;  // calibrate so one trial lasts about min_seconds; keep the fastest trial
      while (TimeProducts(s, a, b, &c, reps) < args.min_seconds / 4 && reps < (1 << 24)) reps *= 2;
      reps *= 4;
      double best = 1e30;
      for (int k = 0; k < args.trials; ++k) best = std::min(best, TimeProducts(s, a, b, &c, reps));
      const double flops = 2.0 * s.m * s.k * s.n * reps;
      std::printf("%s{\"m\": %d, \"k\": %d, \"n\": %d, \"threads\": %d, \"reps\": %d, \"gflop_per_s\": %.2f}", sep, s.m,
                  s.k, s.n, threads, reps, flops * 1e-9 / best);
      sep = ", ";
    }
  }
  std::printf("]}\n");
  return 0;
}
