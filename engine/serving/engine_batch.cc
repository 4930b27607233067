// Engine: batch building (loop thread). Decodes first, then prefill chunks (FCFS), then admission.
// A request whose open segment is full (armt: ModelRunner::SegmentTokensLeft == 0) gets a close
// chunk in its place that step, charged close_tokens() of the budget; content chunks are cut where
// the open segment ends.
#include <algorithm>

#include "engine/serving/engine.h"

namespace mcserve::engine {

int64_t Engine::ChunkEnd(const Request& r, int64_t budget) const {
  const int64_t start = runner_->position(r.slot);
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

Engine::StepPlan Engine::BuildBatch(bool* admission_blocked) {
  StepPlan plan;
  int64_t budget = options_.max_batch_tokens;
  // learn: prompt tokens are user-provided (they train an adaptive CMS); a decode's sampled token is not.
  auto add = [&plan](Request* r, std::span<const int32_t> tokens, bool all_logits, bool learn) {
    plan.chunks.push_back({.slot = r->slot, .tokens = tokens, .all_logits = all_logits, .learn = learn});
    plan.requests.push_back(r);
  };
  // A close costs M tokens (at most the whole budget, so that a close always fits an empty step).
  const int64_t close_cost = std::min(runner_->close_tokens(), options_.max_batch_tokens);
  // Schedules r's close when its open segment is full: true if r is handled this step (closed, or
  // waiting for budget), false when it has room for content.
  auto close_if_full = [&](Request* r) {
    if (runner_->SegmentTokensLeft(r->slot) > 0) return false;
    if (budget >= close_cost) {
      plan.chunks.push_back({.slot = r->slot, .close_segment = true});
      plan.requests.push_back(r);
      budget -= close_cost;
    }
    return true;
  };
  // 1. Decodes first, one token each, least recently scheduled first; a full channel waits.
  std::vector<Request*> decodes;
  for (auto& r : running_) {
    if (r->phase == RequestPhase::kDecode && r->channel->HasRoom()) decodes.push_back(r.get());
  }
  std::stable_sort(decodes.begin(), decodes.end(),
                   [](const Request* a, const Request* b) { return a->last_scheduled < b->last_scheduled; });
  for (Request* r : decodes) {
    if (budget == 0) break;
    if (close_if_full(r)) continue;
    add(r, std::span<const int32_t>(&r->next_input, 1), false, /*learn=*/false);
    --budget;
  }
  // 2. Prefill chunks of admitted requests, in admission order (FCFS).
  auto add_prefill = [&](Request* r) {
    if (close_if_full(r)) return;
    const int64_t start = runner_->position(r->slot);
    const int64_t end = std::min(ChunkEnd(*r, budget), start + std::min(budget, runner_->SegmentTokensLeft(r->slot)));
    // The last chunk yields a token: it needs room in the channel like a decode.
    if (end == r->prompt_len() && !r->channel->HasRoom()) return;
    add(r, std::span<const int32_t>(r->spec.prompt).subspan(start, end - start), r->spec.prompt_logprobs,
        /*learn=*/true);
    budget -= end - start;
  };
  for (auto& r : running_) {
    if (budget == 0) break;
    if (r->phase == RequestPhase::kPrefill) add_prefill(r.get());
  }
  // 3. Admission of waiting requests, FCFS, while budget and slots remain.
  while (budget > 0 && runner_->num_free_slots() > 0) {
    bool stop = false;
    Request* admitted = AdmitHead(admission_blocked, &stop);
    if (stop) break;
    if (admitted != nullptr) add_prefill(admitted);  // null: the head failed and is gone
  }
  return plan;
}

}  // namespace mcserve::engine
