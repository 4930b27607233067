// Helpers shared by the engine loop / engine tests: the test tokenizer, a fake-runner Engine
// (fake_model_runner.h), request specs and a stream collector. Test thread only.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/serving/engine.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/fake_model_runner.h"

namespace mcserve::engine::testing {

inline constexpr absl::Duration kTimeout = absl::Seconds(60);

inline const Tokenizer& Tok() {
  static const Tokenizer* tok = [] {
    auto t = Tokenizer::Load(std::string(MCSERVE_TEST_DATA_DIR) + "/models/gated_deltanet/tokenizer.model");
    if (!t.ok()) {
      ADD_FAILURE() << t.status();
      std::abort();
    }
    return t->release();
  }();
  return *tok;
}

// Everything a stream delivered.
struct Result {
  std::vector<int32_t> tokens;
  std::string text;
  int64_t cached = -1;
  std::vector<float> prompt_logprobs;  // the first event's
  OutputEvent final_event;
  absl::Status status;  // not OK if the stream broke (timeout, events after the final one)
  int events = 0;
};

inline Result Collect(RequestHandle& h) {
  Result r;
  for (;;) {
    absl::StatusOr<OutputEvent> e = h.Next(kTimeout);
    if (!e.ok()) {
      r.status = e.status();
      return r;
    }
    if (r.events++ == 0) {
      r.cached = e->cached_prompt_tokens;
      r.prompt_logprobs = e->prompt_logprobs;
    } else if (!e->prompt_logprobs.empty()) {
      r.status = absl::InternalError("prompt_logprobs after the first event");
    }
    if (r.events > 1 && e->cached_prompt_tokens != -1) {
      r.status = absl::InternalError("cached_prompt_tokens after the first event");
    }
    if (e->token_id >= 0) r.tokens.push_back(e->token_id);
    r.text += e->text;
    if (e->is_final()) {
      r.final_event = *e;
      absl::StatusOr<OutputEvent> after = h.Next(absl::Milliseconds(1));
      if (after.ok() || !absl::IsOutOfRange(after.status())) r.status = absl::InternalError("no end after final");
      return r;
    }
  }
}

inline std::vector<int32_t> Prompt(int n, int salt = 0) {
  std::vector<int32_t> p(n);
  for (int i = 0; i < n; ++i) p[i] = 3 + (i * 31 + salt * 17) % 250;
  return p;
}

inline RequestSpec Spec(std::vector<int32_t> prompt, int max_tokens, float temperature = 0.0f, uint64_t seed = 0) {
  RequestSpec s;
  s.prompt = std::move(prompt);
  s.sampling.temperature = temperature;
  if (temperature > 0) s.sampling.seed = seed;
  s.stop.max_tokens = max_tokens;
  s.stop.ignore_eos = false;
  return s;
}

// The greedy output of the fake for `prompt` (EOS never picked): what every greedy run must equal.
inline std::vector<int32_t> Greedy(const FakeModelRunner& fake, const std::vector<int32_t>& prompt, int n) {
  std::vector<int32_t> h = prompt, out;
  for (int i = 0; i < n; ++i) {
    out.push_back(fake.NextToken(h, static_cast<int64_t>(prompt.size())));
    h.push_back(out.back());
  }
  return out;
}

struct Fixture {
  FakeModelRunner* fake;  // owned by engine
  std::unique_ptr<Engine> engine;
};

inline Fixture Make(int slots, int64_t budget, int64_t boundary = 0, int max_waiting = 256, int capacity = 4096,
                    bool every_boundary = true, int extra_vocab = 0, LatencyObserver* latency_observer = nullptr) {
  FakeModelRunner::Options o;
  o.num_slots = slots;
  o.vocab = Tok().vocab_size() + extra_vocab;
  o.boundary = boundary;
  o.never_pick = {Tok().eos_id(), Tok().bos_id(), 0};
  auto fake = std::make_unique<FakeModelRunner>(o);
  FakeModelRunner* raw = fake.get();
  EngineOptions eo;
  eo.max_waiting = max_waiting;
  eo.max_batch_tokens = budget;
  eo.max_prompt_tokens = 4096;
  eo.channel_capacity = capacity;
  eo.stop_at_every_boundary = every_boundary;
  eo.latency_observer = latency_observer;
  auto engine = Engine::Create(std::move(fake), &Tok(), eo);
  EXPECT_TRUE(engine.ok()) << engine.status();
  return {raw, std::move(*engine)};
}

inline std::shared_ptr<RequestHandle> MustSubmit(Engine& e, RequestSpec s) {
  auto h = e.Submit(std::move(s));
  EXPECT_TRUE(h.ok()) << h.status();
  return h.ok() ? *h : nullptr;
}

// Polls (without asserting on time) until the engine's slots are all free.
inline bool WaitIdle(Engine& e) {
  for (int i = 0; i < 60000; ++i) {
    EngineStats s = e.Stats();
    if (s.slots_used == 0 && s.running == 0 && s.waiting == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

}  // namespace mcserve::engine::testing
