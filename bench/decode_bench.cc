// Decode throughput of the engine: B requests in B slots, each prefilled with P tokens, then N
// batched one-token decode steps (greedy). Prints one JSON line with tokens/s (decode steps only).
// Driven by bench/decode_bench.py, which runs the reference's eager PyTorch decode beside it.
#include <chrono>
#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "engine/runner/cpu_libraries.h"
#include "engine/runner/model.h"
#include "kernels/core/device_runtime.h"

namespace {

using mcserve::engine::Model;
using mcserve::engine::SequenceChunk;

struct Args {
  std::string model;
  std::string device = "cpu";  // cpu, cuda or cuda-emu
  int batch = 1, steps = 128, prefill = 16, threads = 0;
};

bool ParseArgs(int argc, char** argv, Args* a) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i], value = argv[i + 1];
    if (key == "--model") {
      a->model = value;
    } else if (key == "--device") {
      a->device = value;
    } else if (int* field = key == "--batch" ? &a->batch : key == "--steps" ? &a->steps
                            : key == "--prefill" ? &a->prefill : key == "--threads" ? &a->threads : nullptr) {
      if (!absl::SimpleAtoi(value, field)) return false;
    } else {
      return false;
    }
  }
  return !a->model.empty() && a->batch > 0 && a->steps > 0 && a->prefill > 0;
}

}  // namespace

int main(int argc, char** argv) {
  mcserve::engine::PrepareCpuLibraries(argv);  // may re-execute: before anything else
  Args args;
  if (!ParseArgs(argc, argv, &args)) {
    std::fprintf(stderr, "usage: decode_bench --model DIR [--batch B] [--steps N] [--prefill P] [--threads T] "
                 "[--device cpu|cuda|cuda-emu]\n");
    return 2;
  }
  auto device = mcserve::kernels::DeviceFromName(args.device);
  if (!device.ok()) {
    std::fprintf(stderr, "decode_bench: %s\n", std::string(device.status().message()).c_str());
    return 2;
  }
  auto model = Model::Load(args.model, {.device = *device, .num_threads = args.threads});
  if (!model.ok()) {
    std::fprintf(stderr, "decode_bench: %s\n", std::string(model.status().message()).c_str());
    return 1;
  }
  const int64_t vocab = (*model)->config().vocab_size;
  auto pool = (*model)->NewStatePool(args.batch);
  if (!pool.ok()) return 1;
  std::vector<std::vector<int32_t>> prompts(args.batch);
  std::vector<int32_t> next(args.batch);
  std::vector<SequenceChunk> chunks(args.batch);
  for (int b = 0; b < args.batch; ++b) {
    for (int t = 0; t < args.prefill; ++t) prompts[b].push_back(static_cast<int32_t>((7 * b + 13 * t + 3) % vocab));
    chunks[b] = {.slot = b, .tokens = prompts[b]};
  }
  auto step = [&]() -> bool {
    auto logits = (*model)->Forward(chunks, *pool);
    if (!logits.ok()) {
      std::fprintf(stderr, "decode_bench: %s\n", std::string(logits.status().message()).c_str());
      return false;
    }
    auto host = *logits->ToHostF32();
    for (int b = 0; b < args.batch; ++b) {
      const float* row = host.data() + b * vocab;
      next[b] = static_cast<int32_t>(std::max_element(row, row + vocab) - row);
      chunks[b].tokens = {&next[b], 1};
      chunks[b].learn = false;  // sampled tokens never train an adaptive CMS
    }
    return true;
  };
  if (!step()) return 1;  // prefill
  for (int i = 0; i < 8; ++i) {
    if (!step()) return 1;  // warm-up decode steps
  }
  const auto start = std::chrono::steady_clock::now();
  for (int s = 0; s < args.steps; ++s) {
    if (!step()) return 1;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "{\"engine\": \"mcserve\", \"batch\": %d, \"steps\": %d, \"seconds\": %.4f, \"tokens_per_s\": %.1f, "
      "\"state_bytes_per_request\": %lld, \"device\": \"%s\"}\n",
      args.batch, args.steps, seconds, args.batch * args.steps / seconds,
      static_cast<long long>(pool->bytes_per_slot()), mcserve::kernels::DeviceName(*device));
  return 0;
}
