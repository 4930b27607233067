// Engine: admission of the head of the waiting queue into a runner slot (loop thread).
#include "absl/strings/str_cat.h"
#include "engine/serving/engine.h"

namespace mcserve::engine {

Request* Engine::AdmitHead(bool* admission_blocked, bool* stop) {
  Request* head = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (waiting_.empty()) {
      *stop = true;
      return nullptr;
    }
    head = waiting_.front().get();  // only this thread pops, so the head stays valid
  }
  absl::StatusOr<BeginResult> begun = runner_->Begin(head->spec.prompt);
  if (!begun.ok() && absl::IsResourceExhausted(begun.status())) {
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
  if (!begun.ok()) {
    Finish(r.get(), FinalEvent(FinishReason::kError, begun.status()));
    return nullptr;  // the next in line may still be admitted
  }
  r->slot = begun->slot;  // Finish ends the sequence and so releases the slot
  const int64_t cached = begun->cached_tokens;
  if (cached < 0 || cached >= r->prompt_len()) {
    Finish(r.get(), FinalEvent(FinishReason::kError,
                               absl::InternalError(absl::StrCat("ModelRunner::Begin reported ", cached,
                                                                " cached tokens for a prompt of ", r->prompt_len()))));
    return nullptr;
  }
  r->phase = RequestPhase::kPrefill;
  r->cached_tokens = cached;
  counters_.prompt_tokens_cached += cached;
  running_.push_back(std::move(r));
  return running_.back().get();
}

}  // namespace mcserve::engine
