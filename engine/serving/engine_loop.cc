// Engine: the loop thread — reaping cancelled and stalled requests, running each step's batch,
// sampling and sending tokens, finishing requests.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <span>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/serving/engine.h"
#include "engine/serving/prompt_logprobs.h"

namespace mcserve::engine {
namespace {

// How long the idle loop sleeps without a wake-up (a safety net; every event that can create work
// notifies the waker), and how soon Begin is retried after RESOURCE_EXHAUSTED.
constexpr absl::Duration kIdleWait = absl::Milliseconds(200);
constexpr absl::Duration kBeginRetry = absl::Milliseconds(2);

bool IsDone(const std::unique_ptr<Request>& r) { return r->phase == RequestPhase::kDone; }

// True when no logit is NaN or ±infinity (exponent bits all set). One pass without an early exit, so
// that it vectorises: a batch of 64 rows of a 4K vocabulary is checked every step.
bool AllFinite(std::span<const float> logits) {
  constexpr uint32_t kExponent = 0x7f800000u;
  uint32_t non_finite = 0;
  for (float x : logits) non_finite |= (std::bit_cast<uint32_t>(x) & kExponent) == kExponent;
  return non_finite == 0;
}

}  // namespace

void Engine::Loop() {
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) break;
    }
    ReapCancelled();
    ReapStalled();
    bool admission_blocked = false;
    const StepPlan plan = BuildBatch(&admission_blocked);
    if (plan.empty()) {
      PublishStats();
      waker_->Wait(admission_blocked ? kBeginRetry : kIdleWait);
      continue;
    }
    RunStep(plan);
    std::erase_if(running_, IsDone);
    PublishStats();
  }
  CancelAll();
}

void Engine::ReapCancelled() {
  for (auto& r : running_) {
    if (r->phase != RequestPhase::kDone && r->channel->cancelled()) {
      Finish(r.get(), FinalEvent(FinishReason::kCancelled));
    }
  }
  std::erase_if(running_, IsDone);
  std::vector<std::unique_ptr<Request>> cancelled;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      if ((*it)->channel->cancelled()) {
        cancelled.push_back(std::move(*it));
        it = waiting_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& r : cancelled) Finish(r.get(), FinalEvent(FinishReason::kCancelled));
}

void Engine::ReapStalled() {
  if (options_.write_timeout <= absl::ZeroDuration() || options_.write_timeout == absl::InfiniteDuration()) return;
  const auto now = std::chrono::steady_clock::now();
  const auto timeout = absl::ToChronoNanoseconds(options_.write_timeout);
  for (auto& r : running_) {
    if (r->phase == RequestPhase::kDone) continue;
    if (r->channel->HasRoom()) {
      r->stalled_since.reset();
    } else if (!r->stalled_since.has_value()) {
      r->stalled_since = now;
    } else if (now - *r->stalled_since >= timeout) {
      ++counters_.write_timeouts;
      Finish(r.get(), FinalEvent(FinishReason::kCancelled,
                                 absl::DeadlineExceededError(absl::StrCat(
                                     "write timeout: the client read no output for ",
                                     absl::FormatDuration(options_.write_timeout), "; the request was cancelled"))));
    }
  }
  std::erase_if(running_, IsDone);
}

void Engine::RunStep(const StepPlan& plan) {
  absl::StatusOr<StepOutput> out = runner_->Step(plan.chunks);
  ++step_;
  const size_t vocab = static_cast<size_t>(vocab_size_);
  absl::Status failed;
  if (!out.ok()) {
    // The model failed on this batch: its sequences' states are undefined, so they fail; the
    // requests not in the batch and the server go on.
    failed = absl::Status(out.status().code(), absl::StrCat("model step failed: ", out.status().message()));
  } else if (out->logits.size() != plan.chunks.size() * vocab) {
    failed = absl::InternalError(absl::StrCat("ModelRunner::Step returned ", out->logits.size(), " logits for ",
                                              plan.chunks.size(), " sequences x ", vocab, " vocab"));
  }
  if (!failed.ok()) {
    for (Request* r : plan.requests) Finish(r, FinalEvent(FinishReason::kError, failed));
    return;
  }
  for (size_t i = 0; i < plan.requests.size(); ++i) {
    Request* r = plan.requests[i];
    r->last_scheduled = step_;
    if (plan.chunks[i].close_segment) continue;  // a segment close: no token, no logits
    const std::span<const float> row(out->logits.data() + i * vocab, vocab);
    if (!AllFinite(row)) {
      // This sequence's state overflowed (e.g. a fast weight became NaN): its own state is lost,
      // the others in the batch are independent of it and go on.
      Finish(r, FinalEvent(FinishReason::kError,
                           absl::InternalError(absl::StrCat("the model's state for this request became non-finite "
                                                            "(NaN or infinity) at position ",
                                                            runner_->position(r->slot), "; the request was ended"))));
      continue;
    }
    if (r->phase == RequestPhase::kPrefill) {
      counters_.prompt_tokens_processed += static_cast<int64_t>(plan.chunks[i].tokens.size());
      if (plan.chunks[i].all_logits && i < out->prompt_logprobs.size()) {
        CollectPromptLogprobs(r, plan.chunks[i], out->prompt_logprobs[i], row);
      }
      if (runner_->position(r->slot) < r->prompt_len()) continue;  // mid-prompt: no token yet
      r->phase = RequestPhase::kDecode;
      r->last_row = {};
    }
    EmitToken(r, row);
  }
  // The step's token events were pushed quietly: each consumer is woken once they are all queued.
  for (Request* r : plan.requests) r->channel->WakeConsumer();
}

void Engine::CollectPromptLogprobs(Request* r, const SequenceChunk& chunk, std::span<const float> scored,
                                   std::span<const float> last) {
  if (!r->last_row.empty()) r->prompt_logprobs.push_back(TokenLogProb(r->last_row, chunk.tokens[0]));
  r->prompt_logprobs.insert(r->prompt_logprobs.end(), scored.begin(), scored.end());
  r->last_row.assign(last.begin(), last.end());
}

void Engine::EmitToken(Request* r, std::span<const float> logits) {
  SampledToken tok = r->sampler.Sample(logits, r->stream.BannedIds());
  absl::StatusOr<OutputStream::Delta> delta = r->stream.Push(tok.id);
  if (!delta.ok()) {
    Finish(r, FinalEvent(FinishReason::kError, delta.status()));
    return;
  }
  ++counters_.tokens_generated;
  ObserveToken(r);
  OutputEvent e;
  e.token_id = tok.id;
  e.text = std::move(delta->text);
  e.logprob = tok.logprob;
  e.top = std::move(tok.top);
  e.finish = delta->finish;
  e.stop = std::move(delta->stop);
  e.stop_token = delta->stop_token;
  if (!r->first_event_sent) {
    e.cached_prompt_tokens = r->cached_tokens;
    e.prompt_logprobs = std::move(r->prompt_logprobs);
    r->first_event_sent = true;
  }
  if (e.finish != FinishReason::kNone) {
    Finish(r, std::move(e));
  } else {
    r->next_input = tok.id;
    r->channel->PushQuietly(std::move(e));  // room was checked when the step was planned; woken in RunStep
  }
}

void Engine::Finish(Request* r, OutputEvent final_event) {
  if (r->phase == RequestPhase::kDone) return;
  if (r->slot >= 0) {
    runner_->End(r->slot);  // the runner's pool takes the slot back
    r->slot = -1;
  }
  r->phase = RequestPhase::kDone;
  ++counters_.finished[static_cast<int>(final_event.finish)];
  if (options_.latency_observer != nullptr) {
    options_.latency_observer->OnFinished(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - r->submitted).count(), final_event.finish);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    live_.erase(r->id);
  }
  // Publish before the final event so a client that saw it also sees the slot released.
  PublishStats();
  r->channel->Finish(std::move(final_event));
}

void Engine::ObserveToken(Request* r) {
  const auto now = std::chrono::steady_clock::now();
  const bool first = r->stream.generated() == 1;
  if (options_.latency_observer != nullptr) {
    const auto since = now - (first ? r->submitted : r->last_token);
    const double seconds = std::chrono::duration<double>(since).count();
    if (first) {
      options_.latency_observer->OnFirstToken(seconds);
    } else {
      options_.latency_observer->OnInterToken(seconds);
    }
  }
  r->last_token = now;
}

void Engine::CancelAll() {
  for (auto& r : running_) Finish(r.get(), FinalEvent(FinishReason::kCancelled));
  running_.clear();
  std::deque<std::unique_ptr<Request>> waiting;
  {
    std::lock_guard<std::mutex> lock(mu_);
    waiting.swap(waiting_);
  }
  for (auto& r : waiting) Finish(r.get(), FinalEvent(FinishReason::kCancelled));
  PublishStats();
}

}  // namespace mcserve::engine
