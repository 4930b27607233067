// Decode cost of Memory Caching against context length: one request, positioned at `context`
// tokens with exactly the checkpoints MC holds there, then timed greedy decode steps.
//
// The context is synthesised, not prefilled: a short real prefill creates the state and one set of
// checkpoints, then every MC layer's store is filled with copies of a real checkpoint (constant
// segmentation: ⌊context/C⌋ of them; logarithmic: the blocks of context's binary decomposition) and
// the position is set to `context`. Decode cost depends on how many checkpoints a token reads, not
// on their values, and an honest 64K-token GRM prefill is quadratic (hours here).
// Prints one JSON line. Driven by bench/mc_cost_bench.py.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "engine/mc/segmentation.h"
#include "engine/runner/cpu_libraries.h"
#include "engine/runner/model.h"

namespace {

using mcserve::engine::McCheckpoint;
using mcserve::engine::Model;
using mcserve::engine::SequenceChunk;

struct Args {
  std::string model;
  int64_t context = 1024;
  int steps = 32, threads = 0;
  std::map<std::string, std::string> mc;  // --mc field=value, repeated
};

bool Parse(int argc, char** argv, Args* a) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i], value = argv[i + 1];
    if (key == "--model") {
      a->model = value;
    } else if (key == "--context") {
      if (!absl::SimpleAtoi(value, &a->context)) return false;
    } else if (key == "--steps") {
      if (!absl::SimpleAtoi(value, &a->steps)) return false;
    } else if (key == "--threads") {
      if (!absl::SimpleAtoi(value, &a->threads)) return false;
    } else if (key == "--mc") {
      std::vector<std::string> kv = absl::StrSplit(value, absl::MaxSplits('=', 1));
      if (kv.size() != 2) return false;
      a->mc[kv[0]] = kv[1];
    } else {
      return false;
    }
  }
  return !a->model.empty() && a->context >= 1 && a->steps > 0;
}

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "mc_cost_bench: %s\n", std::string(s.message()).c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  mcserve::engine::PrepareCpuLibraries(argv);  // may re-execute: before anything else
  Args args;
  if (!Parse(argc, argv, &args)) {
    std::fprintf(stderr, "usage: mc_cost_bench --model DIR --context L [--steps N] [--threads T] [--mc field=value]...\n");
    return 2;
  }
  auto model = Model::Load(args.model, {.num_threads = args.threads, .mc_overrides = args.mc});
  if (!model.ok()) return Fail(model.status());
  const auto& mc = (*model)->config().memory_caching;
  auto pool = (*model)->NewStatePool(1);
  if (!pool.ok()) return Fail(pool.status());
  const int64_t vocab = (*model)->config().vocab_size;
  // A real prefill long enough to close a segment (the same length for every variant: a shorter
  // warm-up measurably slows the steps that follow on our machines).
  const int64_t warm = std::min<int64_t>(
      mc && mc->segmentation == mcserve::engine::McSegmentation::kConstant ? std::max<int64_t>(mc->segment_size, 256)
                                                                            : 256,
      args.context);
  std::vector<int32_t> prompt(warm);
  for (int64_t t = 0; t < warm; ++t) prompt[t] = static_cast<int32_t>((13 * t + 3) % vocab);
  SequenceChunk chunk{.slot = 0, .tokens = prompt};
  auto logits = (*model)->Forward({&chunk, 1}, *pool);
  if (!logits.ok()) return Fail(logits.status());
  // Fast-forward to `context`: the checkpoints MC would hold there.
  auto& store = pool->checkpoints();
  for (int layer = 0; mc && layer < (*model)->config().num_hidden_layers; ++layer) {
    auto cps = store.Checkpoints(0, layer);
    if (cps.empty()) continue;
    const McCheckpoint templ{cps.back()->memory, cps.back()->pooled_key, cps.back()->segment};
    store.DropNewest(0, layer, static_cast<int>(cps.size()));
    std::vector<mcserve::engine::Segment> segments;
    if (mc->segmentation == mcserve::engine::McSegmentation::kConstant) {
      for (int64_t s = 0; s < args.context / mc->segment_size; ++s) {
        segments.push_back({s * mc->segment_size + 1, (s + 1) * mc->segment_size, 0});
      }
    } else {
      segments = mcserve::engine::FenwickSegments(args.context);
    }
    for (const auto& segment : segments) {
      if (absl::Status s = store.Freeze(0, layer, templ.memory, templ.pooled_key, segment); !s.ok()) return Fail(s);
    }
  }
  pool->Advance(0, args.context - warm);

  const std::vector<float> last = *logits->ToHostF32();
  int32_t next = static_cast<int32_t>(std::max_element(last.begin(), last.end()) - last.begin());
  auto step = [&]() -> absl::Status {
    SequenceChunk c{.slot = 0, .tokens = {&next, 1}, .learn = false};  // a sampled token
    auto out = (*model)->Forward({&c, 1}, *pool);
    if (!out.ok()) return out.status();
    auto host = *out->ToHostF32();
    next = static_cast<int32_t>(std::max_element(host.begin(), host.end()) - host.begin());
    return absl::OkStatus();
  };
  for (int i = 0; i < 4; ++i) {
    if (absl::Status s = step(); !s.ok()) return Fail(s);  // warm-up
  }
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < args.steps; ++i) {
    if (absl::Status s = step(); !s.ok()) return Fail(s);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const int64_t bytes = pool->bytes_per_slot() + store.bytes();
  std::printf("{\"context\": %lld, \"tokens_per_s\": %.1f, \"bytes_per_request\": %lld}\n",
              static_cast<long long>(args.context), args.steps / seconds, static_cast<long long>(bytes));
  return 0;
}
