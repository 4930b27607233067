// Engine tests (continuous batching, admission, cancellation) against a deterministic fake ModelRunner (fake_model_runner.h) and the
// real test tokenizer. Assertions are on what happened (batches, events, stats), never on timing;
// timeouts only keep a broken build from hanging.
#include "engine/serving/engine.h"

#include <algorithm>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/serving/prompt_logprobs.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/engine_test_util.h"
#include "tests/unit/thread_names.h"

namespace mcserve::engine {
namespace {

using namespace testing;  // NOLINT: the engine test helpers

TEST(EngineTest, SubmitRejectsBadInputNamingTheProblem) {
  Fixture f = Make(2, 64);
  const int vocab = Tok().vocab_size();
  struct Case {
    std::string name;
    RequestSpec spec;
    std::string message;
  } cases[] = {
      {"empty", Spec({}, 4), "prompt is empty"},
      {"too long", Spec(Prompt(4097), 4), "max_prompt_tokens"},
      {"id >= vocab", Spec({5, vocab, 6}, 4), "outside the vocabulary"},
      {"negative id", Spec({-1}, 4), "outside the vocabulary"},
      {"bad temperature", Spec({5}, 4, -1.0f), "temperature"},
      {"bad max_tokens", Spec({5}, 0), "max_tokens"},
  };
  for (const Case& c : cases) {
    auto h = f.engine->Submit(c.spec);
    ASSERT_FALSE(h.ok()) << c.name;
    EXPECT_EQ(h.status().code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_NE(h.status().message().find(c.message), std::string::npos) << c.name << ": " << h.status();
  }
  EXPECT_EQ(f.fake->begin_calls(), 0);
}

TEST(EngineTest, TheLoopThreadIsNamedForTopAndPerf) {
  const int before = mcserve::testing::CountThreadsNamed("mcserve-engine");
  {
    Fixture f = Make(2, 64);
    EXPECT_EQ(mcserve::testing::CountThreadsNamed("mcserve-engine"), before + 1);
  }
  EXPECT_EQ(mcserve::testing::CountThreadsNamed("mcserve-engine"), before);
}

TEST(EngineTest, CreateRejectsBudgetBelowSlots) {
  FakeModelRunner::Options o;
  o.num_slots = 8;
  o.vocab = Tok().vocab_size();
  EngineOptions eo;
  eo.max_batch_tokens = 4;
  auto e = Engine::Create(std::make_unique<FakeModelRunner>(o), &Tok(), eo);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("max_batch_tokens"), std::string::npos) << e.status();
}

TEST(EngineTest, MoreRequestsThanSlotsWaitThenAllFinish) {
  Fixture f = Make(2, 64);
  EXPECT_EQ(f.engine->EffectiveConcurrency(), 2);
  std::vector<std::shared_ptr<RequestHandle>> hs;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 7; ++i) {
    prompts.push_back(Prompt(5 + i, i));
    hs.push_back(MustSubmit(*f.engine, Spec(prompts.back(), 6)));
  }
  for (int i = 0; i < 7; ++i) {
    Result r = Collect(*hs[i]);
    ASSERT_TRUE(r.status.ok()) << r.status;
    EXPECT_EQ(r.final_event.finish, FinishReason::kLength);
    EXPECT_EQ(r.tokens, Greedy(*f.fake, prompts[i], 6)) << i;
  }
  EXPECT_EQ(f.fake->begun(), prompts);  // admitted in submission order
  for (const auto& step : f.fake->steps()) EXPECT_LE(step.size(), 2u);
  EXPECT_EQ(f.fake->violations(), 0);
  ASSERT_TRUE(WaitIdle(*f.engine));
  EngineStats s = f.engine->Stats();
  EXPECT_EQ(s.finished_by(FinishReason::kLength), 7);
  EXPECT_EQ(s.tokens_generated, 42);
  EXPECT_EQ(f.fake->active(), 0);
}

// Every step: ≤ max_batch_tokens tokens, decodes (1 token, past the prompt) before prefill chunks,
// every decoding sequence present, each prefill chunk ending on a boundary when one fits (and, by
// default, never crossing one).
TEST(EngineTest, BudgetDecodeFirstAndBoundaryAlignmentEveryStep) {
  struct Case {
    int slots;
    int64_t budget, boundary;
    bool every_boundary;
  } cases[] = {{1, 1, 0, true},    {2, 7, 0, true},    {4, 16, 8, true},  {4, 37, 16, true},  {8, 64, 16, true},
               {3, 200, 32, true}, {4, 5, 4, true},    {4, 37, 16, false}, {3, 200, 32, false}, {4, 5, 4, false},
               {2, 100, 7, false}, {2, 100, 7, true}};
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "slots " << c.slots << " budget " << c.budget << " boundary " << c.boundary
                                      << " every " << c.every_boundary);
    Fixture f = Make(c.slots, c.budget, c.boundary, 256, 4096, c.every_boundary);
    f.fake->SetCachedPrefix([&c](std::span<const int32_t> p) -> int64_t {
      if (c.boundary == 0 || p.size() % 3 != 0) return 0;  // some hits, some misses
      return static_cast<int64_t>((p.size() - 1) / c.boundary * c.boundary);
    });
    std::vector<std::shared_ptr<RequestHandle>> hs;
    std::vector<std::vector<int32_t>> prompts;
    for (int i = 0; i < 10; ++i) {
      prompts.push_back(Prompt(1 + (i * 37) % 90, i));
      hs.push_back(MustSubmit(*f.engine, Spec(prompts.back(), 1 + i % 5)));
    }
    for (int i = 0; i < 10; ++i) {
      Result r = Collect(*hs[i]);
      ASSERT_TRUE(r.status.ok()) << r.status;
      EXPECT_EQ(r.tokens, Greedy(*f.fake, prompts[i], 1 + i % 5));
    }
    int prefill_chunks = 0, multi_block_chunks = 0;
    for (const auto& step : f.fake->steps()) {
      int64_t total = 0;
      bool seen_prefill = false;
      for (const auto& seq : step) {
        const int64_t n = static_cast<int64_t>(seq.tokens.size());
        total += n;
        if (seq.prefill()) {
          seen_prefill = true;
          ++prefill_chunks;
          const int64_t end = seq.start + n;
          EXPECT_LE(end, seq.prompt_size);
          if (c.boundary > 0 && end % c.boundary != 0) {
            EXPECT_LE(end / c.boundary * c.boundary, seq.start) << "a boundary fits in chunk [" << seq.start << ", "
                                                                << end << ") but the chunk is not aligned";
          }
          if (c.boundary > 0 && (end - 1) / c.boundary != seq.start / c.boundary) {
            ++multi_block_chunks;
            EXPECT_FALSE(c.every_boundary) << "chunk [" << seq.start << ", " << end << ") crosses a boundary";
          }
        } else {
          EXPECT_EQ(n, 1);
          EXPECT_FALSE(seen_prefill) << "decode after a prefill chunk in the batch";
        }
      }
      EXPECT_LE(total, c.budget);
    }
    EXPECT_GE(prefill_chunks, 10);
    // Without the per-boundary stop, a large budget does run several blocks in one chunk.
    if (!c.every_boundary && c.budget > 2 * c.boundary) {
      EXPECT_GT(multi_block_chunks, 0);
    }
    EXPECT_EQ(f.fake->decode_missing(), 0);
    EXPECT_EQ(f.fake->violations(), 0);
  }
}


// A long prompt submitted first keeps getting prefill budget every step until it is done, while
// short requests behind it are admitted only with what is left (FCFS, no starvation).
TEST(EngineTest, LongPromptIsNotStarvedByLaterShortOnes) {
  Fixture f = Make(4, 16);
  std::vector<int32_t> long_prompt = Prompt(300, 99);
  auto long_handle = MustSubmit(*f.engine, Spec(long_prompt, 3));
  std::vector<std::shared_ptr<RequestHandle>> shorts;
  for (int i = 0; i < 12; ++i) shorts.push_back(MustSubmit(*f.engine, Spec(Prompt(3, i), 20)));
  Result lr = Collect(*long_handle);
  ASSERT_TRUE(lr.status.ok()) << lr.status;
  EXPECT_EQ(lr.tokens, Greedy(*f.fake, long_prompt, 3));
  for (auto& h : shorts) ASSERT_TRUE(Collect(*h).status.ok());
  ASSERT_EQ(f.fake->begun().front(), long_prompt);
  // From its first chunk to its last, every step carries a chunk of the long prompt.
  const int long_slot = f.fake->steps().front().front().slot;
  bool started = false, done = false;
  for (const auto& step : f.fake->steps()) {
    if (done) break;
    bool has = false;
    for (const auto& seq : step) {
      if (seq.slot == long_slot && seq.prompt_size == 300 && seq.prefill()) {
        has = true;
        if (seq.start + static_cast<int64_t>(seq.tokens.size()) == 300) done = true;
      }
    }
    started |= has;
    if (started) {
      EXPECT_TRUE(has) << "a step skipped the oldest prefill";
    }
  }
  EXPECT_TRUE(done);
}

TEST(EngineTest, FullQueueIsResourceExhaustedNamingTheLimit) {
  Fixture f = Make(1, 8, 0, /*max_waiting=*/2);
  f.fake->SetExhausted(1 << 30);  // Begin never finds room: everything stays queued
  auto a = MustSubmit(*f.engine, Spec(Prompt(4), 2));
  auto b = MustSubmit(*f.engine, Spec(Prompt(5), 2));
  auto c = f.engine->Submit(Spec(Prompt(6), 2));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(c.status().message().find("max_waiting = 2"), std::string::npos) << c.status();
  EXPECT_EQ(f.engine->Stats().waiting, 2);
  f.fake->SetExhausted(0);
  EXPECT_TRUE(Collect(*a).status.ok());
  EXPECT_TRUE(Collect(*b).status.ok());
  EXPECT_TRUE(f.engine->Submit(Spec(Prompt(6), 2)).ok());  // room again
}

// Begin says RESOURCE_EXHAUSTED a few times: the head waits (not failed, not overtaken), then runs.
TEST(EngineTest, BeginExhaustedRetriesWithoutReordering) {
  Fixture f = Make(2, 32);
  f.fake->SetExhausted(5);
  std::vector<std::vector<int32_t>> prompts = {Prompt(9, 1), Prompt(4, 2), Prompt(6, 3)};
  std::vector<std::shared_ptr<RequestHandle>> hs;
  for (const auto& p : prompts) hs.push_back(MustSubmit(*f.engine, Spec(p, 4)));
  for (size_t i = 0; i < hs.size(); ++i) {
    Result r = Collect(*hs[i]);
    ASSERT_TRUE(r.status.ok()) << r.status;
    EXPECT_EQ(r.final_event.finish, FinishReason::kLength);
    EXPECT_EQ(r.tokens, Greedy(*f.fake, prompts[i], 4));
  }
  EXPECT_EQ(f.fake->exhausted_left(), 0);
  EXPECT_EQ(f.fake->begin_calls(), 5 + 3);
  EXPECT_EQ(f.fake->begun(), prompts);
}

// Begin failing for other reasons fails that request only; those admitted around it run normally.
TEST(EngineTest, BeginErrorFailsOnlyThatRequest) {
  Fixture f = Make(3, 64);
  constexpr int32_t kRefused = 9;
  f.fake->SetBeginFailure(kRefused);
  f.fake->SetExhausted(1 << 30);  // queue all three, then admit them in one step
  std::vector<int32_t> pa = {5, 6, 7, 8}, pc = {11, 12};
  auto a = MustSubmit(*f.engine, Spec(pa, 3));
  auto b = MustSubmit(*f.engine, Spec({kRefused, 4, 4}, 3));
  auto c = MustSubmit(*f.engine, Spec(pc, 3));
  f.fake->SetExhausted(0);
  Result ra = Collect(*a), rb = Collect(*b), rc = Collect(*c);
  EXPECT_EQ(rb.final_event.finish, FinishReason::kError);
  EXPECT_EQ(rb.final_event.error.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ra.tokens, Greedy(*f.fake, pa, 3));
  EXPECT_EQ(rc.tokens, Greedy(*f.fake, pc, 3));
  EXPECT_EQ(f.fake->violations(), 0);
  ASSERT_TRUE(WaitIdle(*f.engine));
  EXPECT_EQ(f.fake->end_calls().size(), 2u);  // the refused one was never begun, so never ended
}

TEST(EngineTest, CachedPrefixSkipsPromptTokensAndIsReported) {
  Fixture f = Make(1, 64, 16);
  f.fake->SetCachedPrefix([](std::span<const int32_t> p) { return static_cast<int64_t>((p.size() - 1) / 16 * 16); });
  std::vector<int32_t> prompt = Prompt(40);
  auto h = MustSubmit(*f.engine, Spec(prompt, 3));
  Result r = Collect(*h);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.cached, 32);
  EXPECT_EQ(r.tokens, Greedy(*f.fake, prompt, 3));
  ASSERT_FALSE(f.fake->steps().empty());
  EXPECT_EQ(f.fake->steps()[0][0].start, 32);  // the prompt resumed at the cached boundary
  ASSERT_TRUE(WaitIdle(*f.engine));
  EXPECT_EQ(f.engine->Stats().prompt_tokens_cached, 32);
  EXPECT_EQ(f.engine->Stats().prompt_tokens_processed, 8);
}

TEST(EngineTest, StopCriteriaEndRequests) {
  Fixture f = Make(2, 32);
  f.fake->SetForcedToken(3, Tok().eos_id());  // every sequence's 3rd token is EOS
  auto by_length = MustSubmit(*f.engine, [] {
    RequestSpec s = Spec(Prompt(5), 5);
    s.stop.ignore_eos = true;
    return s;
  }());
  auto by_eos = MustSubmit(*f.engine, Spec(Prompt(6), 50));
  Result l = Collect(*by_length);
  ASSERT_TRUE(l.status.ok()) << l.status;
  EXPECT_EQ(l.tokens.size(), 5u);
  EXPECT_EQ(l.final_event.finish, FinishReason::kLength);
  Result e = Collect(*by_eos);
  ASSERT_TRUE(e.status.ok()) << e.status;
  EXPECT_EQ(e.final_event.finish, FinishReason::kStop);
  EXPECT_EQ(e.final_event.stop_token, Tok().eos_id());
  ASSERT_GE(e.tokens.size(), 2u);
  EXPECT_LE(e.tokens.size(), 3u);
  ASSERT_TRUE(WaitIdle(*f.engine));
  EXPECT_EQ(f.engine->Stats().finished_by(FinishReason::kStop), 1);
  EXPECT_EQ(f.engine->Stats().finished_by(FinishReason::kLength), 1);
}

// Cancellation at a step boundary, mid-prefill and mid-decode, by Abort, Engine::Abort or by
// dropping the handle: the slot is released and End is called exactly once.
TEST(EngineTest, CancellationReleasesTheSlotOnce) {
  enum How { kHandleAbort, kEngineAbort, kDropHandle };
  struct Case {
    std::string name;
    int64_t pause_step;  // the step during which the client cancels
    How how;
    bool mid_prefill;
  } cases[] = {
      {"prefill/abort", 2, kHandleAbort, true},   {"prefill/engine", 1, kEngineAbort, true},
      {"prefill/drop", 3, kDropHandle, true},     {"decode/abort", 30, kHandleAbort, false},
      {"decode/engine", 25, kEngineAbort, false}, {"decode/drop", 28, kDropHandle, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Fixture f = Make(2, 8);
    f.fake->PauseAtStep(c.pause_step);
    auto h = MustSubmit(*f.engine, Spec(Prompt(80), 1000));  // 80-token prompt: 10 prefill steps
    ASSERT_TRUE(f.fake->WaitBlocked());
    const uint64_t id = h->id();
    if (c.how == kHandleAbort) h->Abort();
    if (c.how == kEngineAbort) {
      ASSERT_TRUE(f.engine->Abort(id).ok());
    }
    if (c.how == kDropHandle) h.reset();
    f.fake->Resume();
    if (h != nullptr) {
      Result r = Collect(*h);
      ASSERT_TRUE(r.status.ok()) << r.status;
      EXPECT_EQ(r.final_event.finish, FinishReason::kCancelled);
      if (c.mid_prefill) {
        EXPECT_TRUE(r.tokens.empty());
      } else {
        EXPECT_EQ(r.tokens.size(), static_cast<size_t>(c.pause_step - 8));  // steps 9..pause_step each made one
      }
    }
    ASSERT_TRUE(WaitIdle(*f.engine));
    EXPECT_EQ(f.engine->Stats().finished_by(FinishReason::kCancelled), 1);
    EXPECT_EQ(f.fake->end_calls(), (std::map<int, int>{{0, 1}}));
    EXPECT_EQ(f.fake->active(), 0);
    EXPECT_EQ(f.fake->steps().size(), static_cast<size_t>(c.pause_step + 1));  // nothing ran after
    EXPECT_EQ(f.engine->Abort(id).code(), absl::StatusCode::kNotFound);
  }
}

TEST(EngineTest, CancelWhileWaitingNeverBegins) {
  Fixture f = Make(1, 8);
  f.fake->PauseAtStep(0);
  auto running = MustSubmit(*f.engine, Spec(Prompt(4), 3));
  ASSERT_TRUE(f.fake->WaitBlocked());
  auto queued = MustSubmit(*f.engine, Spec(Prompt(5), 3));
  queued->Abort();
  f.fake->Resume();
  Result q = Collect(*queued);
  ASSERT_TRUE(q.status.ok()) << q.status;
  EXPECT_EQ(q.final_event.finish, FinishReason::kCancelled);
  EXPECT_TRUE(Collect(*running).status.ok());
  EXPECT_EQ(f.fake->begin_calls(), 1);
}

// A failing Step fails the requests in that batch with its error; the queue behind goes on.
TEST(EngineTest, StepErrorFailsThatBatchOnly) {
  Fixture f = Make(2, 64);
  constexpr int32_t kPoison = 7;
  f.fake->SetPoisonToken(kPoison);
  RequestSpec bad = Spec({5, 6, kPoison, 8}, 4);
  RequestSpec also_in_batch = Spec(Prompt(3), 4);
  f.fake->PauseAtStep(0);
  auto a = MustSubmit(*f.engine, bad);
  ASSERT_TRUE(f.fake->WaitBlocked());  // the first step holds only `bad`...
  f.fake->Resume();
  Result ra = Collect(*a);
  ASSERT_TRUE(ra.status.ok()) << ra.status;
  EXPECT_EQ(ra.final_event.finish, FinishReason::kError);
  EXPECT_EQ(ra.final_event.error.code(), absl::StatusCode::kInternal);
  EXPECT_NE(ra.final_event.error.message().find("poisoned"), std::string::npos) << ra.final_event.error;
  // ... then two requests admitted together share a failing batch; the one queued behind runs.
  f.fake->SetExhausted(1 << 30);  // hold admission while all three queue up
  auto b = MustSubmit(*f.engine, bad);
  auto c = MustSubmit(*f.engine, also_in_batch);
  auto d = MustSubmit(*f.engine, Spec(Prompt(4, 4), 4));
  f.fake->SetExhausted(0);  // b and c are admitted in the same step (2 slots), d waits
  Result rb = Collect(*b), rc = Collect(*c);
  EXPECT_EQ(rb.final_event.finish, FinishReason::kError);
  EXPECT_EQ(rc.final_event.finish, FinishReason::kError);
  EXPECT_TRUE(rc.tokens.empty());
  EXPECT_NE(rc.final_event.error.message().find("model step failed"), std::string::npos) << rc.final_event.error;
  Result rd = Collect(*d);
  ASSERT_TRUE(rd.status.ok()) << rd.status;
  EXPECT_EQ(rd.final_event.finish, FinishReason::kLength);
  EXPECT_EQ(rd.tokens, Greedy(*f.fake, Prompt(4, 4), 4));
  EXPECT_EQ(f.engine->Stats().finished_by(FinishReason::kError), 3);
  ASSERT_TRUE(WaitIdle(*f.engine));
  EXPECT_EQ(f.fake->active(), 0);
  EXPECT_EQ(f.fake->violations(), 0);
}

// 64 requests of mixed lengths and sampling through 8 slots: each output equals the same request
// run alone; everything is released at the end.
TEST(EngineTest, ManyConcurrentRequestsMatchRunningAlone) {
  constexpr int kN = 64;
  std::vector<RequestSpec> specs;
  for (int i = 0; i < kN; ++i) {
    RequestSpec s = Spec(Prompt(1 + (i * 53) % 150, i), 1 + (i * 7) % 30, i % 2 ? 0.9f : 0.0f, 1000 + i);
    if (i % 4 == 1) s.sampling.top_k = 20;
    if (i % 8 == 3) s.sampling.logprobs = 2;
    specs.push_back(s);
  }
  auto cached = [](std::span<const int32_t> p) {
    return p.size() % 2 ? static_cast<int64_t>((p.size() - 1) / 16 * 16) : int64_t{0};
  };
  std::vector<Result> alone(kN);
  {
    Fixture f = Make(1, 16, 16);
    f.fake->SetCachedPrefix(cached);
    for (int i = 0; i < kN; ++i) {
      auto h = MustSubmit(*f.engine, specs[i]);
      alone[i] = Collect(*h);
      ASSERT_TRUE(alone[i].status.ok()) << alone[i].status;
    }
  }
  Fixture f = Make(8, 48, 16, 256, 3);
  f.fake->SetCachedPrefix(cached);
  std::vector<std::shared_ptr<RequestHandle>> hs(kN);
  for (int i = 0; i < kN; ++i) hs[i] = MustSubmit(*f.engine, specs[i]);
  std::vector<Result> together(kN);
  std::vector<std::thread> readers;
  for (int t = 0; t < 8; ++t) {
    readers.emplace_back([&, t] {
      for (int i = t; i < kN; i += 8) together[i] = Collect(*hs[i]);
    });
  }
  for (auto& th : readers) th.join();
  int64_t generated = 0;
  for (int i = 0; i < kN; ++i) {
    SCOPED_TRACE(i);
    ASSERT_TRUE(together[i].status.ok()) << together[i].status;
    EXPECT_EQ(together[i].tokens, alone[i].tokens);
    EXPECT_EQ(together[i].text, alone[i].text);
    EXPECT_EQ(together[i].cached, alone[i].cached);
    EXPECT_EQ(together[i].final_event.finish, alone[i].final_event.finish);
    if (specs[i].sampling.temperature == 0) {
      EXPECT_EQ(together[i].tokens, Greedy(*f.fake, specs[i].prompt, specs[i].stop.max_tokens));
    }
    generated += static_cast<int64_t>(together[i].tokens.size());
  }
  ASSERT_TRUE(WaitIdle(*f.engine));
  EngineStats s = f.engine->Stats();
  EXPECT_EQ(s.slots_used, 0);
  EXPECT_EQ(s.slots_total, 8);
  EXPECT_EQ(s.tokens_generated, generated);
  EXPECT_EQ(s.finished_by(FinishReason::kLength) + s.finished_by(FinishReason::kStop), kN);
  EXPECT_EQ(f.fake->active(), 0);
  EXPECT_EQ(f.fake->violations(), 0);
  for (const auto& step : f.fake->steps()) {
    int64_t total = 0;
    for (const auto& seq : step) total += static_cast<int64_t>(seq.tokens.size());
    EXPECT_LE(total, 48);
  }
}

// Shutdown with requests running, queued and unread: every stream ends with kCancelled, every
// begun sequence is ended once, and later Submits are refused.
TEST(EngineTest, ShutdownCancelsEverythingInFlight) {
  Fixture f = Make(2, 16, 0, 256, 2);
  std::vector<std::shared_ptr<RequestHandle>> hs;
  for (int i = 0; i < 6; ++i) hs.push_back(MustSubmit(*f.engine, Spec(Prompt(10 + i, i), 10000)));
  ASSERT_TRUE(hs[0]->Next(kTimeout).ok());  // something is running
  f.engine->Shutdown();
  for (auto& h : hs) {
    Result r = Collect(*h);
    ASSERT_TRUE(r.status.ok()) << r.status;
    EXPECT_EQ(r.final_event.finish, FinishReason::kCancelled);
  }
  EXPECT_EQ(f.fake->active(), 0);
  for (const auto& [slot, n] : f.fake->end_calls()) EXPECT_EQ(n, 1) << slot;
  EXPECT_EQ(f.engine->Submit(Spec(Prompt(3), 2)).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(f.engine->Stats().finished_by(FinishReason::kCancelled), 6);
  f.engine->Shutdown();  // idempotent
}

// A runner with more ids than the tokenizer (padded embeddings): those ids are never sampled and
// are refused in prompts.
TEST(EngineTest, PaddedVocabularyIdsAreNeverSampled) {
  Fixture f = Make(2, 32, 0, 256, 4096, true, /*extra_vocab=*/64);
  auto bad = f.engine->Submit(Spec({5, Tok().vocab_size() + 3}, 4));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  std::vector<std::shared_ptr<RequestHandle>> hs;
  for (int i = 0; i < 8; ++i) hs.push_back(MustSubmit(*f.engine, Spec(Prompt(4, i), 30, 1.5f, i)));
  int tokens = 0;
  for (auto& h : hs) {
    Result r = Collect(*h);
    ASSERT_TRUE(r.status.ok()) << r.status;
    ASSERT_NE(r.final_event.finish, FinishReason::kError) << r.final_event.error;
    for (int32_t t : r.tokens) EXPECT_LT(t, Tok().vocab_size());
    tokens += static_cast<int>(r.tokens.size());
  }
  EXPECT_GT(tokens, 0);
}

// vLLM's prompt_logprobs: the first event carries log p(prompt[i] | prompt[<i]) for every i ≥ 1,
// across prefill chunks (budget 8: chunks of 8, 8, 5), equal to the fake's own rows; the generated
// tokens are those of the same request without it.
TEST(EngineTest, PromptLogprobsScoreEveryPromptTokenAcrossChunks) {
  Fixture f = Make(1, 8);
  const std::vector<int32_t> prompt = Prompt(21, 3);
  RequestSpec with = Spec(prompt, 3);
  with.prompt_logprobs = true;
  Result scored = Collect(*MustSubmit(*f.engine, with));
  Result plain = Collect(*MustSubmit(*f.engine, Spec(prompt, 3)));
  ASSERT_TRUE(scored.status.ok() && plain.status.ok()) << scored.status << plain.status;
  EXPECT_EQ(scored.tokens, plain.tokens);
  EXPECT_TRUE(plain.prompt_logprobs.empty());
  ASSERT_EQ(scored.prompt_logprobs.size(), prompt.size() - 1);
  for (size_t i = 1; i < prompt.size(); ++i) {
    const std::vector<float> row =
        f.fake->LogitsAfter(std::span<const int32_t>(prompt).first(i), static_cast<int64_t>(prompt.size()));
    EXPECT_FLOAT_EQ(scored.prompt_logprobs[i - 1], TokenLogProb(row, prompt[i])) << i;
    EXPECT_LT(scored.prompt_logprobs[i - 1], 0.0f);
  }
}

}  // namespace
}  // namespace mcserve::engine
