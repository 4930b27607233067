#include "engine/serving/scheduler.h"

#include <algorithm>
#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace mcserve::engine {
namespace {

// How long the idle loop sleeps without a wake-up (a safety net; every event that can create work
// notifies the waker), and how soon Begin is retried after RESOURCE_EXHAUSTED.
constexpr absl::Duration kIdleWait = absl::Milliseconds(200);
constexpr absl::Duration kBeginRetry = absl::Milliseconds(2);

OutputEvent FinalEvent(FinishReason reason, absl::Status error = absl::OkStatus()) {
  OutputEvent e;
  e.finish = reason;
  e.error = std::move(error);
  return e;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Scheduler>> Scheduler::Create(ModelRunner* runner, const Tokenizer* tokenizer,
                                                             SchedulerOptions options) {
  if (runner == nullptr || tokenizer == nullptr) {
    return absl::InvalidArgumentError("Scheduler: runner and tokenizer are required");
  }
  if (runner->num_slots() < 1) return absl::InvalidArgumentError("Scheduler: the runner has no state slots");
  if (options.max_waiting < 0) {
    return absl::InvalidArgumentError(absl::StrCat("max_waiting must be ≥ 0, got ", options.max_waiting));
  }
  if (options.max_batch_tokens < runner->num_slots()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_batch_tokens (", options.max_batch_tokens, ") must be at least the number of state slots (",
        runner->num_slots(), ") so that every running request can decode each step"));
  }
  if (options.max_prompt_tokens < 1) {
    return absl::InvalidArgumentError(absl::StrCat("max_prompt_tokens must be ≥ 1, got ", options.max_prompt_tokens));
  }
  if (options.channel_capacity < 1) {
    return absl::InvalidArgumentError(absl::StrCat("channel_capacity must be ≥ 1, got ", options.channel_capacity));
  }
  std::unique_ptr<Scheduler> s(new Scheduler(runner, tokenizer, options));
  s->PublishStats();
  s->thread_ = std::thread([p = s.get()] { p->Loop(); });
  return s;
}

Scheduler::Scheduler(ModelRunner* runner, const Tokenizer* tokenizer, SchedulerOptions options)
    : runner_(runner),
      tokenizer_(tokenizer),
      options_(options),
      num_slots_(runner->num_slots()),
      vocab_size_(runner->vocab_size()),
      boundary_(runner->boundary_tokens()) {
  for (int s = num_slots_ - 1; s >= 0; --s) free_slots_.push_back(s);
  for (int32_t id = tokenizer->vocab_size(); id < vocab_size_; ++id) padding_ids_.push_back(id);
  counters_.slots_total = num_slots_;
}

Scheduler::~Scheduler() { Shutdown(); }

absl::StatusOr<std::shared_ptr<RequestHandle>> Scheduler::Submit(RequestSpec spec) {
  // Prompt ids must be known to both the tokenizer and the model.
  MCSERVE_RETURN_IF_ERROR(ValidatePrompt(spec.prompt, std::min<int>(vocab_size_, tokenizer_->vocab_size()),
                                         options_.max_prompt_tokens));
  MCSERVE_ASSIGN_OR_RETURN(Sampler sampler, Sampler::Create(spec.sampling, vocab_size_));
  sampler.SetPrompt(spec.prompt);
  MCSERVE_ASSIGN_OR_RETURN(OutputStream stream, OutputStream::Create(tokenizer_, spec.stop, tokenizer_->eos_id(), spec.prompt));
  const uint64_t id = next_id_.fetch_add(1);
  auto channel = std::make_shared<OutputChannel>(static_cast<size_t>(options_.channel_capacity), waker_);
  auto request = std::make_unique<Request>(id, std::move(spec), channel, std::move(sampler), std::move(stream));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return absl::UnavailableError("the engine is shutting down");
    if (static_cast<int64_t>(waiting_.size()) >= options_.max_waiting) {
      return absl::ResourceExhaustedError(absl::StrCat("the waiting queue is full (max_waiting = ",
                                                       options_.max_waiting, " requests); retry later"));
    }
    waiting_.push_back(std::move(request));
    live_[id] = channel;
  }
  waker_->Notify();
  return std::make_shared<RequestHandle>(id, std::move(channel));
}

absl::Status Scheduler::Abort(uint64_t id) {
  std::shared_ptr<OutputChannel> channel;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(id);
    if (it != live_.end()) channel = it->second.lock();
  }
  if (channel == nullptr) return absl::NotFoundError(absl::StrCat("no queued or running request with id ", id));
  channel->Cancel();
  return absl::OkStatus();
}

void Scheduler::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  waker_->Notify();
  if (thread_.joinable()) thread_.join();
}

SchedulerStats Scheduler::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  SchedulerStats s = stats_;
  s.waiting = static_cast<int64_t>(waiting_.size());
  return s;
}

void Scheduler::PublishStats() {
  SchedulerStats s = counters_;
  s.slots_used = num_slots_ - static_cast<int>(free_slots_.size());
  s.running = std::count_if(running_.begin(), running_.end(),
                            [](const auto& r) { return r->phase != RequestPhase::kDone; });
  s.runner = runner_->stats();
  s.steps = step_;
  std::lock_guard<std::mutex> lock(mu_);
  stats_ = s;
}

void Scheduler::Loop() {
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) break;
    }
    ReapCancelled();
    ReapStalled();
    bool admission_blocked = false;
    std::vector<Planned> plan = BuildBatch(&admission_blocked);
    if (plan.empty()) {
      PublishStats();
      waker_->Wait(admission_blocked ? kBeginRetry : kIdleWait);
      continue;
    }
    RunStep(plan);
    std::erase_if(running_, [](const auto& r) { return r->phase == RequestPhase::kDone; });
    PublishStats();
  }
  CancelAll();
}

void Scheduler::ReapCancelled() {
  for (auto& r : running_) {
    if (r->phase != RequestPhase::kDone && r->channel->cancelled()) Finish(r.get(), FinalEvent(FinishReason::kCancelled));
  }
  std::erase_if(running_, [](const auto& r) { return r->phase == RequestPhase::kDone; });
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

void Scheduler::ReapStalled() {
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
  std::erase_if(running_, [](const auto& r) { return r->phase == RequestPhase::kDone; });
}

int64_t Scheduler::ChunkEnd(const Request& r, int64_t budget) const {
  const int64_t start = r.position;
  int64_t end = std::min(r.prompt_len(), start + budget);
  if (boundary_ > 0) {
    if (options_.stop_at_every_boundary) {
      // Stop at the first boundary after start: the chunk never crosses one mid-step.
      end = std::min(end, (start / boundary_ + 1) * boundary_);
    } else {
      // Round down to a segment boundary when one lies in (start, end]; otherwise keep the partial
      // chunk (a later chunk re-aligns, since boundaries are absolute prompt positions).
      const int64_t aligned = end / boundary_ * boundary_;
      if (aligned > start) end = aligned;
    }
  }
  return end;
}

std::vector<Scheduler::Planned> Scheduler::BuildBatch(bool* admission_blocked) {
  std::vector<Planned> plan;
  int64_t budget = options_.max_batch_tokens;
  // 1. Decodes first, one token each, least recently scheduled first; a full channel waits.
  std::vector<Request*> decodes;
  for (auto& r : running_) {
    if (r->phase == RequestPhase::kDecode && r->channel->HasRoom()) decodes.push_back(r.get());
  }
  std::stable_sort(decodes.begin(), decodes.end(),
                   [](const Request* a, const Request* b) { return a->last_scheduled < b->last_scheduled; });
  for (Request* r : decodes) {
    if (budget == 0) break;
    plan.push_back({r, std::span<const int32_t>(&r->next_input, 1), false});
    --budget;
  }
  // 2. Prefill chunks of admitted requests, in admission order (FCFS).
  auto add_prefill = [&](Request* r) {
    const int64_t end = ChunkEnd(*r, budget);
    // The last chunk yields a token: it needs room in the channel like a decode.
    if (end == r->prompt_len() && !r->channel->HasRoom()) return;
    plan.push_back({r, std::span<const int32_t>(r->spec.prompt).subspan(r->position, end - r->position), true});
    budget -= end - r->position;
  };
  for (auto& r : running_) {
    if (budget == 0) break;
    if (r->phase == RequestPhase::kPrefill) add_prefill(r.get());
  }
  // 3. Admission of waiting requests, FCFS, while budget and slots remain.
  while (budget > 0 && !free_slots_.empty()) {
    bool stop = false;
    Request* admitted = AdmitHead(admission_blocked, &stop);
    if (stop) break;
    if (admitted != nullptr) add_prefill(admitted);  // null: the head failed and is gone
  }
  return plan;
}

Request* Scheduler::AdmitHead(bool* admission_blocked, bool* stop) {
  Request* head = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (waiting_.empty()) {
      *stop = true;
      return nullptr;
    }
    head = waiting_.front().get();  // only this thread pops, so the head stays valid
  }
  const int slot = free_slots_.back();
  absl::StatusOr<int64_t> cached = runner_->Begin(slot, head->spec.prompt);
  if (!cached.ok() && absl::IsResourceExhausted(cached.status())) {
    // No room in the checkpoint store now: the head keeps its place (FCFS; later requests don't
    // jump ahead) and Begin is retried next step, after running requests may have ended.
    *admission_blocked = true;
    *stop = true;
    return nullptr;
  }
  std::unique_ptr<Request> r;
  {
    std::lock_guard<std::mutex> lock(mu_);
    r = std::move(waiting_.front());
    waiting_.pop_front();
  }
  if (!cached.ok()) {
    Finish(r.get(), FinalEvent(FinishReason::kError, cached.status()));
    return nullptr;  // the next in line may still be admitted
  }
  free_slots_.pop_back();
  r->slot = slot;
  if (*cached < 0 || *cached >= r->prompt_len()) {
    Finish(r.get(), FinalEvent(FinishReason::kError,
                               absl::InternalError(absl::StrCat("ModelRunner::Begin reported ", *cached,
                                                                " cached tokens for a prompt of ", r->prompt_len()))));
    return nullptr;
  }
  r->phase = RequestPhase::kPrefill;
  r->cached_tokens = r->position = *cached;
  counters_.prompt_tokens_cached += *cached;
  running_.push_back(std::move(r));
  return running_.back().get();
}

void Scheduler::RunStep(const std::vector<Planned>& plan) {
  std::vector<StepSequence> batch;
  batch.reserve(plan.size());
  for (const Planned& p : plan) batch.push_back({p.request->slot, p.tokens});
  absl::StatusOr<std::vector<float>> logits = runner_->Step(batch);
  ++step_;
  if (!logits.ok()) {
    // The model failed on this batch: its sequences' states are undefined, so they fail; the
    // requests not in the batch and the server go on.
    for (const Planned& p : plan) {
      Finish(p.request, FinalEvent(FinishReason::kError,
                                   absl::Status(logits.status().code(),
                                                absl::StrCat("model step failed: ", logits.status().message()))));
    }
    return;
  }
  const size_t vocab = static_cast<size_t>(vocab_size_);
  if (logits->size() != plan.size() * vocab) {
    for (const Planned& p : plan) {
      Finish(p.request, FinalEvent(FinishReason::kError,
                                   absl::InternalError(absl::StrCat("ModelRunner::Step returned ", logits->size(),
                                                                    " logits for ", plan.size(), " sequences x ",
                                                                    vocab, " vocab"))));
    }
    return;
  }
  for (size_t i = 0; i < plan.size(); ++i) {
    Request* r = plan[i].request;
    r->last_scheduled = step_;
    if (plan[i].prefill) {
      r->position += static_cast<int64_t>(plan[i].tokens.size());
      counters_.prompt_tokens_processed += static_cast<int64_t>(plan[i].tokens.size());
      if (r->position < r->prompt_len()) continue;  // mid-prompt: these logits are not used
      r->phase = RequestPhase::kDecode;
    }
    std::vector<int32_t> banned = r->stream.BannedIds();
    banned.insert(banned.end(), padding_ids_.begin(), padding_ids_.end());
    SampledToken tok = r->sampler.Sample(std::span<const float>(logits->data() + i * vocab, vocab), banned);
    absl::StatusOr<OutputStream::Delta> delta = r->stream.Push(tok.id);
    if (!delta.ok()) {
      Finish(r, FinalEvent(FinishReason::kError, delta.status()));
      continue;
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
      r->first_event_sent = true;
    }
    if (e.finish != FinishReason::kNone) {
      Finish(r, std::move(e));
    } else {
      r->next_input = tok.id;
      r->channel->Push(std::move(e));  // room was checked when the step was planned
    }
  }
}

void Scheduler::Finish(Request* r, OutputEvent final_event) {
  if (r->phase == RequestPhase::kDone) return;
  if (r->slot >= 0) {
    runner_->End(r->slot);
    free_slots_.push_back(r->slot);
    std::sort(free_slots_.begin(), free_slots_.end(), std::greater<int>());
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

void Scheduler::ObserveToken(Request* r) {
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

void Scheduler::CancelAll() {
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
