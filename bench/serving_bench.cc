// Serving throughput and time to first token through the Engine (its loop + RecurrentRunner):
//   --mode throughput: N concurrent greedy requests (prompt P tokens, G generated each, EOS ignored),
//     generated tokens/s over the wall time from the first submit to the last final event; read by
//     one thread woken by the requests' output listeners (--consumer listener, how the gRPC and
//     HTTP front ends consume) or by a blocking reader thread per request (--consumer threads);
//   --mode ttft: time to first token of a long prompt, cold (nothing cached) and with its first
//     `prefix` tokens already in the prefix cache (a previous request with the same prefix).
// Prints one JSON line. Driven by bench/serving_bench.py.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "engine/runner/cpu_libraries.h"
#include "engine/runner/model.h"
#include "engine/serving/engine.h"
#include "engine/serving/recurrent_runner.h"

namespace {

using mcserve::engine::Engine;
using mcserve::engine::Model;
using mcserve::engine::RequestHandle;
using mcserve::engine::RequestSpec;
using Clock = std::chrono::steady_clock;

struct Args {
  std::string model, mode = "throughput", consumer = "listener";
  int concurrency = 1, prompt = 64, generate = 64, threads = 0;
  int prefix = 2048;
  std::map<std::string, std::string> mc;  // --mc field=value, repeated
};

bool Parse(int argc, char** argv, Args* a) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i], value = argv[i + 1];
    bool ok = true;
    if (key == "--model") {
      a->model = value;
    } else if (key == "--mode") {
      a->mode = value;
    } else if (key == "--consumer") {
      a->consumer = value;
    } else if (key == "--concurrency") {
      ok = absl::SimpleAtoi(value, &a->concurrency);
    } else if (key == "--prompt") {
      ok = absl::SimpleAtoi(value, &a->prompt);
    } else if (key == "--generate") {
      ok = absl::SimpleAtoi(value, &a->generate);
    } else if (key == "--prefix") {
      ok = absl::SimpleAtoi(value, &a->prefix);
    } else if (key == "--threads") {
      ok = absl::SimpleAtoi(value, &a->threads);
    } else if (key == "--mc") {
      const size_t eq = value.find('=');
      if (eq == std::string::npos) return false;
      a->mc[value.substr(0, eq)] = value.substr(eq + 1);
    } else {
      return false;
    }
    if (!ok) return false;
  }
  return !a->model.empty() && (a->mode == "throughput" || a->mode == "ttft") &&
         (a->consumer == "listener" || a->consumer == "threads");
}

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "serving_bench: %s\n", s.ToString().c_str());
  return 1;
}

// Deterministic pseudo-random prompt ids (never 0..2: pad/bos/eos).
std::vector<int32_t> Prompt(int length, uint32_t seed, int vocab) {
  std::vector<int32_t> ids(length);
  uint32_t x = seed * 2654435761u + 1;
  for (int32_t& id : ids) {
    x = x * 1664525u + 1013904223u;
    id = 3 + static_cast<int32_t>((x >> 8) % static_cast<uint32_t>(vocab - 3));
  }
  return ids;
}

RequestSpec Greedy(std::vector<int32_t> prompt, int generate) {
  RequestSpec spec;
  spec.prompt = std::move(prompt);
  spec.sampling.temperature = 0.0f;
  spec.stop.max_tokens = generate;
  spec.stop.ignore_eos = true;
  return spec;
}

// Reads `handle` to its final event; returns the generated token count and the first token's time.
int Drain(RequestHandle& handle, Clock::time_point* first_token) {
  int tokens = 0;
  while (true) {
    auto event = handle.Next(absl::Minutes(10));
    if (!event.ok()) return tokens;
    if (event->token_id >= 0 && tokens++ == 0 && first_token != nullptr) *first_token = Clock::now();
    if (!event->error.ok()) std::fprintf(stderr, "serving_bench: %s\n", event->error.ToString().c_str());
    if (event->is_final()) return tokens;
  }
}

// Reads every handle to its final event with one thread, woken by the handles' output listeners (which
// only flag and notify, as a front end's post to its event loop would); returns the token counts.
std::vector<int> DrainByListeners(const std::vector<std::shared_ptr<RequestHandle>>& handles) {
  std::mutex mu;
  std::condition_variable cv;
  bool ready = false;
  for (const auto& h : handles) {
    h->OnOutput([&] {
      std::lock_guard<std::mutex> lock(mu);
      ready = true;
      cv.notify_one();
    });
  }
  std::vector<int> counts(handles.size());
  std::vector<bool> done(handles.size());
  for (size_t finished = 0; finished < handles.size();) {
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return ready; });
      ready = false;
    }
    for (size_t r = 0; r < handles.size(); ++r) {
      for (auto event = done[r] ? std::nullopt : handles[r]->TryNext(); event; event = handles[r]->TryNext()) {
        if (event->token_id >= 0) ++counts[r];
        if (!event->error.ok()) std::fprintf(stderr, "serving_bench: %s\n", event->error.ToString().c_str());
        if (event->is_final()) {
          done[r] = true;
          ++finished;
          break;
        }
      }
    }
  }
  for (const auto& h : handles) h->OnOutput(nullptr);
  return counts;
}

double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

}  // namespace

int main(int argc, char** argv) {
  mcserve::engine::PrepareCpuLibraries(argv);  // may re-execute: before anything else
  Args args;
  if (!Parse(argc, argv, &args)) {
    std::fprintf(stderr,
                 "usage: serving_bench --model DIR [--mode throughput|ttft] [--concurrency N] [--prompt P] "
                 "[--generate G] [--prefix TOKENS] [--threads T] [--consumer listener|threads] [--mc field=value]...\n");
    return 2;
  }
  auto model = Model::Load(args.model, {.num_threads = args.threads, .mc_overrides = args.mc});
  if (!model.ok()) return Fail(model.status());
  // Prompt ids must be valid for both the model and its tokenizer (the bench model pads its vocabulary).
  const int vocab = std::min(static_cast<int>((*model)->config().vocab_size), (*model)->tokenizer().vocab_size());
  auto runner = mcserve::engine::RecurrentRunner::Create(
      model->get(), {.num_slots = std::max(args.concurrency, 1), .prefix_block = 64});
  if (!runner.ok()) return Fail(runner.status());
  auto engine = Engine::Create(std::move(*runner), &(*model)->tokenizer(), {.max_batch_tokens = 2048});
  if (!engine.ok()) return Fail(engine.status());

  if (args.mode == "throughput") {
    std::vector<std::shared_ptr<RequestHandle>> handles;
    const Clock::time_point start = Clock::now();
    for (int r = 0; r < args.concurrency; ++r) {
      auto handle = (*engine)->Submit(Greedy(Prompt(args.prompt, 1000 + r, vocab), args.generate));
      if (!handle.ok()) return Fail(handle.status());
      handles.push_back(std::move(*handle));
    }
    std::vector<int> counts(handles.size());
    if (args.consumer == "listener") {
      counts = DrainByListeners(handles);
    } else {
      std::vector<std::thread> readers;
      for (size_t r = 0; r < handles.size(); ++r) {
        readers.emplace_back([&, r] { counts[r] = Drain(*handles[r], nullptr); });
      }
      for (std::thread& t : readers) t.join();
    }
    const double seconds = Seconds(start, Clock::now());
    int64_t total = 0;
    for (int c : counts) total += c;
    std::printf("{\"mode\": \"throughput\", \"concurrency\": %d, \"generated\": %lld, \"seconds\": %.4f, "
                "\"tokens_per_s\": %.2f}\n",
                args.concurrency, static_cast<long long>(total), seconds, total / seconds);
    return 0;
  }

  // TTFT: a cold long prompt, a warm-up request that caches `prefix` tokens, then the same prefix
  // with another tail.
  auto ttft = [&](std::vector<int32_t> prompt, int64_t* cached) -> double {
    const Clock::time_point start = Clock::now();
    auto handle = (*engine)->Submit(Greedy(std::move(prompt), 1));
    if (!handle.ok()) return -1;
    Clock::time_point first = start;
    Drain(**handle, &first);
    *cached = (*engine)->Stats().prompt_tokens_cached;
    return Seconds(start, first);
  };
  const std::vector<int32_t> prefix = Prompt(args.prefix, 7, vocab);
  auto with_tail = [&](uint32_t seed) {
    std::vector<int32_t> p = prefix;
    const std::vector<int32_t> tail = Prompt(args.prompt, seed, vocab);
    p.insert(p.end(), tail.begin(), tail.end());
    return p;
  };
  int64_t cached_before = 0, cached_after = 0;
  std::vector<int32_t> cold_prompt = with_tail(11);
  cold_prompt[0] = cold_prompt[0] == 3 ? 4 : 3;  // shares no block with what gets cached
  const double cold = ttft(cold_prompt, &cached_before);
  double unused = ttft(with_tail(12), &cached_before);  // caches the prefix
  (void)unused;
  const double warm = ttft(with_tail(13), &cached_after);
  std::printf("{\"mode\": \"ttft\", \"prefix\": %d, \"tail\": %d, \"cold_s\": %.5f, \"cached_s\": %.5f, "
              "\"cached_tokens\": %lld}\n",
              args.prefix, args.prompt, cold, warm, static_cast<long long>(cached_after - cached_before));
  return 0;
}
