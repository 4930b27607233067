// Test helpers for an Engine serving a real fixture: the deterministic request mix the end-to-end
// tests submit, draining a request's events, and the 64-request mixed workload (greedy and seeded
// sampling, prefix sharing, aborts) whose leftovers the tests then check. Test threads only.
#pragma once

#include <memory>
#include <thread>
#include <vector>

#include "engine/serving/engine.h"
#include "gtest/gtest.h"

namespace mcserve::testing {

// What a request produced, from its events.
struct Outcome {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;  // per token (0 unless logprobs were asked)
  engine::FinishReason finish = engine::FinishReason::kNone;
  int64_t cached = -1;  // prompt tokens resumed from the prefix cache
};

// Reads `handle`'s events up to the final one (each must carry no error).
inline Outcome Drain(engine::RequestHandle& handle) {
  Outcome out;
  while (true) {
    auto event = handle.Next(absl::Seconds(120));
    if (!event.ok()) break;
    if (event->cached_prompt_tokens >= 0) out.cached = event->cached_prompt_tokens;
    if (event->token_id >= 0) {
      out.tokens.push_back(event->token_id);
      out.logprobs.push_back(event->logprob);
    }
    EXPECT_TRUE(event->error.ok()) << event->error;
    if (event->is_final()) {
      out.finish = event->finish;
      break;
    }
  }
  return out;
}

// Request r: a greedy prompt of 2 + (7·r mod 41) tokens, the first 16 shared by the even requests.
inline engine::RequestSpec MixedSpec(int r, int vocab, int max_tokens) {
  engine::RequestSpec spec;
  const int length = 2 + (7 * r) % 41;
  for (int i = 0; i < length; ++i) {
    const bool shared = r % 2 == 0 && i < 16;
    spec.prompt.push_back(3 + (shared ? (5 * i + 1) : (11 * r + 5 * i + 3 * i * i)) % (vocab - 3));
  }
  spec.sampling.temperature = 0.0f;
  spec.stop.max_tokens = max_tokens;
  spec.stop.ignore_eos = true;
  return spec;
}

// MixedSpec 0..n−1 (request r asks 1 + r mod 12 tokens) submitted one after another, each drained
// before the next: what each request gives alone.
inline std::vector<Outcome> RunMixedAlone(engine::Engine& engine, int vocab, int n) {
  std::vector<Outcome> out;
  for (int r = 0; r < n; ++r) {
    auto handle = engine.Submit(MixedSpec(r, vocab, 1 + r % 12));
    EXPECT_TRUE(handle.ok()) << handle.status();
    out.push_back(handle.ok() ? Drain(**handle) : Outcome{});
  }
  return out;
}

// The same n requests submitted all at once and drained by a reader thread each.
inline std::vector<Outcome> RunMixedTogether(engine::Engine& engine, int vocab, int n) {
  std::vector<std::shared_ptr<engine::RequestHandle>> handles;
  for (int r = 0; r < n; ++r) {
    auto handle = engine.Submit(MixedSpec(r, vocab, 1 + r % 12));
    EXPECT_TRUE(handle.ok()) << handle.status();
    if (handle.ok()) handles.push_back(std::move(*handle));
  }
  std::vector<Outcome> out(handles.size());
  std::vector<std::thread> readers;
  for (size_t r = 0; r < handles.size(); ++r) readers.emplace_back([&, r] { out[r] = Drain(*handles[r]); });
  for (std::thread& t : readers) t.join();
  return out;
}

// How the 64-request workload ended.
struct MixedResult {
  int cancelled = 0, finished = 0;
};

// Submits MixedSpec 0..63 (every third sampled with a seed), aborts every ninth, drains them all.
inline MixedResult RunSixtyFourMixedRequests(engine::Engine& engine, int vocab) {
  std::vector<std::shared_ptr<engine::RequestHandle>> handles;
  for (int r = 0; r < 64; ++r) {
    engine::RequestSpec spec = MixedSpec(r, vocab, 1 + (r * 5) % 20);
    if (r % 3 == 1) {  // sampled, seeded
      spec.sampling.temperature = 0.8f;
      spec.sampling.top_p = 0.9f;
      spec.sampling.seed = r;
    }
    auto handle = engine.Submit(std::move(spec));
    EXPECT_TRUE(handle.ok()) << handle.status();
    if (handle.ok()) handles.push_back(std::move(*handle));
  }
  for (size_t r = 0; r < handles.size(); r += 9) handles[r]->Abort();  // some clients give up
  MixedResult result;
  for (auto& handle : handles) {
    const Outcome out = Drain(*handle);
    result.cancelled += out.finish == engine::FinishReason::kCancelled ? 1 : 0;
    result.finished += out.finish == engine::FinishReason::kLength ? 1 : 0;
  }
  return result;
}

}  // namespace mcserve::testing
