// The decode kernels on a GPU against its memory bandwidth: a device-to-device copy sets the ceiling
// (bytes read + written per second), then each kernel runs at a size several times the L2 cache and
// reports the bytes it must move per call (each input read once, each output written once) over its
// time, as GB/s and as a fraction of the copy's rate. Kernels: Linear's GEMV (m = 1 and 8, F32 and
// BF16 weights) and LinearMemory's gated-delta decode step (one token per sequence). Every input is
// random (never zeros). Times are medians of --trials, each the mean of --iters back-to-back calls
// between two synchronisations. Prints one JSON object, {"device", "results": [rows]}.
// `--device cuda-emu --quick` runs every row at a tiny size on the emulator (the ctest smoke test).
// See docs/cuda.md; scripts/gpu_check.sh runs it on a GPU machine.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "kernels/core/batch_layout.h"
#include "kernels/core/context.h"
#include "kernels/core/device_runtime.h"
#include "kernels/core/dtype.h"
#include "kernels/core/tensor.h"
#include "kernels/core/tensor_data.h"
#include "kernels/linear/linear.h"
#include "kernels/linear_memory/linear_memory.h"

namespace {

using mcserve::kernels::Context;
using mcserve::kernels::Device;
using mcserve::kernels::DeviceRuntime;
using mcserve::kernels::DType;
using mcserve::kernels::Shape;
using mcserve::kernels::Tensor;

struct Args {
  std::string device = "cuda";
  bool quick = false;  // tiny sizes (the emulator smoke test)
  int trials = 7, iters = 20;
};

bool ParseArgs(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; ++i) {
    const std::string key = argv[i];
    if (key == "--quick") {
      a->quick = true;
    } else if (i + 1 < argc && key == "--device") {
      a->device = argv[++i];
    } else if (int* field = key == "--trials" ? &a->trials : key == "--iters" ? &a->iters : nullptr;
               field != nullptr && i + 1 < argc) {
      if (!absl::SimpleAtoi(argv[++i], field) || *field < 1) return false;
    } else {
      return false;
    }
  }
  return true;
}

// Exits with the status's message when it is not OK (a benchmark has no partial result).
void Check(const absl::Status& s, const char* what) {
  if (s.ok()) return;
  std::fprintf(stderr, "cuda_kernel_bench: %s: %s\n", what, s.ToString().c_str());
  std::exit(1);
}

template <typename T>
T Take(absl::StatusOr<T> v, const char* what) {
  Check(v.status(), what);
  return *std::move(v);
}

// A device tensor of `dtype` (F32 or BF16) holding uniform random values in [-scale, scale].
Tensor RandomTensor(DType dtype, const Shape& shape, Device device, float scale, uint32_t seed) {
  Tensor t = Take(Tensor::Zeros(dtype, shape, device), "allocate");
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> values(t.numel());
  for (float& v : values) v = dist(rng);
  DeviceRuntime* rt = Take(mcserve::kernels::RuntimeFor(device), "runtime");
  if (dtype == DType::kF32) {
    Check(rt->CopyHostToDevice(mcserve::kernels::RawData(t), values.data(), t.nbytes()), "copy");
  } else {
    std::vector<uint16_t> bits(values.size());
    for (size_t i = 0; i < values.size(); ++i) bits[i] = mcserve::kernels::F32ToBf16(values[i]);
    Check(rt->CopyHostToDevice(mcserve::kernels::RawData(t), bits.data(), t.nbytes()), "copy");
  }
  return t;
}

// Median over `trials` of the mean seconds per call of `iters` back-to-back calls of `run`.
double MedianSecondsPerCall(const Args& args, DeviceRuntime* rt, const std::function<absl::Status()>& run) {
  Check(run(), "warm-up");
  Check(rt->Synchronize(), "synchronize");
  std::vector<double> per_call;
  for (int t = 0; t < args.trials; ++t) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < args.iters; ++i) Check(run(), "run");
    Check(rt->Synchronize(), "synchronize");
    per_call.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / args.iters);
  }
  std::sort(per_call.begin(), per_call.end());
  return per_call[per_call.size() / 2];
}

// The rows measured so far, as JSON objects; main prints them as one report.
std::vector<std::string>& Results() {
  static std::vector<std::string> results;
  return results;
}

// Records a row: its bytes per call, time per call, GB/s and fraction of the copy ceiling; echoes it
// to stderr as it goes.
void Report(const std::string& row, double bytes, double seconds, double ceiling_gbps) {
  const double gbps = bytes / seconds / 1e9;
  char line[512];
  std::snprintf(line, sizeof line,
                "{\"row\": \"%s\", \"bytes\": %.0f, \"us_per_call\": %.2f, \"gb_per_s\": %.4g, \"of_copy\": %.4g}",
                row.c_str(), bytes, seconds * 1e6, gbps, ceiling_gbps > 0 ? gbps / ceiling_gbps : 0.0);
  std::fprintf(stderr, "%s\n", line);
  Results().push_back(line);
}

// The ceiling: a device-to-device copy of `bytes`, counting bytes read plus bytes written.
double CopyCeiling(const Args& args, Device device, DeviceRuntime* rt, int64_t bytes) {
  const int64_t n = bytes / 4;
  Tensor src = RandomTensor(DType::kF32, {n}, device, 1.0f, 1);
  Tensor dst = Take(Tensor::Zeros(DType::kF32, {n}, device), "allocate");
  const double s = MedianSecondsPerCall(args, rt, [&] {
    return rt->CopyDeviceToDevice(mcserve::kernels::RawData(dst), mcserve::kernels::RawData(src), n * 4);
  });
  const double gbps = 2.0 * n * 4 / s / 1e9;
  Report("copy", 2.0 * n * 4, s, gbps);
  return gbps;
}

// Linear's GEMV: x [m, k] · w [n, k]ᵀ; bytes = the weight once plus x and out.
void GemvRow(const Args& args, Device device, DeviceRuntime* rt, double ceiling, DType dtype, int64_t m,
             int64_t n, int64_t k) {
  Tensor w = RandomTensor(dtype, {n, k}, device, 0.05f, 2);
  Tensor x = RandomTensor(DType::kF32, {m, k}, device, 1.0f, 3);
  Tensor out = Take(Tensor::Zeros(DType::kF32, {m, n}, device), "allocate");
  const Context ctx{.device = device};
  const double s = MedianSecondsPerCall(args, rt, [&] {
    return mcserve::kernels::Linear(ctx, {.x = &x, .w = &w, .out = &out});
  });
  const double bytes = static_cast<double>(n) * k * mcserve::kernels::DTypeSize(dtype) + 4.0 * m * (k + n);
  Report(std::string("linear_gemv_") + (dtype == DType::kF32 ? "f32" : "bf16") + "_m" + std::to_string(m) + "_" +
             std::to_string(n) + "x" + std::to_string(k),
         bytes, s, ceiling);
}

// LinearMemory's gated-delta decode step: `seqs` sequences of one token each, Hs heads of K × V
// F32 state; bytes = the state read and written, q, k, v, out and the two gates.
void GatedDeltaRow(const Args& args, Device device, DeviceRuntime* rt, double ceiling, int64_t seqs, int64_t heads,
                   int64_t dim) {
  std::vector<int32_t> cu(seqs + 1), slots(seqs);
  for (int64_t b = 0; b <= seqs; ++b) cu[b] = static_cast<int32_t>(b);
  for (int64_t b = 0; b < seqs; ++b) slots[b] = static_cast<int32_t>(b);
  Tensor cu_t = Take(Tensor::FromHostI32(cu, {seqs + 1}, device), "cu_seqlens");
  Tensor slots_t = Take(Tensor::FromHostI32(slots, {seqs}, device), "slot_ids");
  Tensor q = RandomTensor(DType::kF32, {seqs, heads, dim}, device, 0.1f, 4);  // [T, H, K]
  Tensor k = RandomTensor(DType::kF32, {seqs, heads, dim}, device, 0.1f, 5);  // [T, H, K]
  Tensor v = RandomTensor(DType::kF32, {seqs, heads, dim}, device, 1.0f, 6);  // [T, H, V]
  Tensor decay = RandomTensor(DType::kF32, {seqs, heads}, device, 0.05f, 7);  // [T, H] α (small: bounded state)
  Tensor beta = RandomTensor(DType::kF32, {seqs, heads}, device, 0.5f, 8);    // [T, H]
  Tensor state = RandomTensor(DType::kF32, {seqs, heads, dim, dim}, device, 0.01f, 9);  // [slots, H, K, V]
  Tensor out = Take(Tensor::Zeros(DType::kF32, {seqs, heads, dim}, device), "allocate");  // [T, H, V]
  const Context ctx{.device = device};
  const mcserve::kernels::LinearMemoryArgs lm{.rule = mcserve::kernels::LinearMemoryRule::kGatedDelta,
                                              .q = &q, .k = &k, .v = &v, .decay = &decay, .beta = &beta,
                                              .layout = {.cu_seqlens = &cu_t, .slot_ids = &slots_t},
                                              .state = &state, .out = &out};
  const double s = MedianSecondsPerCall(args, rt, [&] { return mcserve::kernels::LinearMemory(ctx, lm); });
  const double bytes = 2.0 * state.nbytes() + q.nbytes() + k.nbytes() + v.nbytes() + out.nbytes() +
                       decay.nbytes() + beta.nbytes() + cu_t.nbytes() + slots_t.nbytes();
  Report("gated_delta_decode_" + std::to_string(seqs) + "x" + std::to_string(heads) + "x" + std::to_string(dim) +
             "x" + std::to_string(dim),
         bytes, s, ceiling);
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (!ParseArgs(argc, argv, &args)) {
    std::fprintf(stderr, "usage: cuda_kernel_bench [--device cuda|cuda-emu] [--quick] [--trials N] [--iters N]\n");
    return 2;
  }
  const Device device = Take(mcserve::kernels::DeviceFromName(args.device), "device");
  if (device == Device::kCpu) {
    std::fprintf(stderr, "cuda_kernel_bench: --device must be cuda or cuda-emu\n");
    return 2;
  }
  DeviceRuntime* rt = Take(mcserve::kernels::RuntimeFor(device), "runtime");
  // Full sizes: every operand set is ≥ 4× an H100/H200's 50-60 MB L2, so each call streams from HBM.
  const int64_t scale = args.quick ? 1 : 64;
  const double ceiling = CopyCeiling(args, device, rt, args.quick ? (1 << 16) : (int64_t{1} << 30));
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    for (int64_t m : {1, 8}) GemvRow(args, device, rt, ceiling, dtype, m, 256 * scale, 128 * scale);
    // The same weight bytes with 4× shorter rows: x (m rows of k) fits in L1 at m = 8.
    GemvRow(args, device, rt, ceiling, dtype, 8, 1024 * scale, 32 * scale);
  }
  // 4 heads of 64 × 64 (the benchmark model's layer); 4096 sequences: 256 MB of state.
  GatedDeltaRow(args, device, rt, ceiling, args.quick ? 3 : 4096, 4, args.quick ? 16 : 64);
  std::printf("{\"device\": \"%s\", \"results\": [", args.device.c_str());
  for (size_t i = 0; i < Results().size(); ++i) std::printf("%s%s", i ? ", " : "", Results()[i].c_str());
  std::printf("]}\n");
  return 0;
}
