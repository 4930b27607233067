// ModelRunner: what the engine needs from a loaded model — state slots, one batched forward step,
// and prefix reuse — so that scheduling is tested with a fake runner and served with the real one
// (RecurrentRunner: Model + StatePool + CheckpointStore). Engine loop thread only.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/runner/model.h"

namespace mcserve::engine {

// Counters of the runner's slots and checkpoint store, for the Engine's stats snapshot.
struct RunnerStats {
  int64_t device_pages = 0, host_pages = 0;  // checkpoint pages per tier
  int64_t referenced_pages = 0;              // pages a running sequence holds
  int64_t stagings = 0;                      // host → device page copies
  int64_t prefix_hits = 0, prefix_misses = 0;
  int64_t prefix_cached_tokens = 0;          // prompt tokens skipped thanks to prefix reuse
  int64_t evictions = 0;                     // unreferenced pages dropped to make room
  int64_t prefix_cache_entries = 0;          // cached prefix blocks (boundary-state snapshots)
  int64_t prefix_cache_bytes = 0;            // host bytes of those snapshots
  int64_t prefix_cache_budget_bytes = 0;     // their budget (--prefix-cache-mib); -1 = unlimited
};

// Where ModelRunner::Begin put a new sequence.
struct BeginResult {
  int slot = -1;              // the state slot it acquired
  int64_t cached_tokens = 0;  // prompt tokens resumed from the prefix cache (0 on a miss)
};

// What ModelRunner::Step returns, in host memory.
struct StepOutput {
  std::vector<float> logits;  // [batch, vocab]: each chunk's last-token logits, a row per chunk in order
  // [batch]: for a chunk with all_logits, log p(tokens[j] | everything the slot ran before it) for
  // j = 1 .. n−1 (n − 1 values; the first token is scored from the previous step's row by the
  // caller); empty for the other chunks.
  std::vector<std::vector<float>> prompt_logprobs;
};

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;

  // State slots: the most sequences that can run at once.
  virtual int num_slots() const = 0;
  virtual int vocab_size() const = 0;
  // Prefix blocks: the state is snapshotted for prefix reuse after every multiple of this many prompt
  // tokens (0 = no prefix reuse). Chunks may end anywhere; ending on a multiple saves the runner a
  // split forward pass.
  virtual int64_t boundary_tokens() const = 0;
  // The most token positions a sequence may reach (prompt + generated; gam's block_size when it does
  // not clamp positions); 0 = no limit.
  virtual int64_t max_positions() const { return 0; }

  // Segments (armt): content tokens the sequence in `slot` may run before its open segment must be
  // closed; 0 means the next chunk for it must be a close chunk (SequenceChunk::close_segment). The
  // families without segments never need one (INT64_MAX).
  virtual int64_t SegmentTokensLeft(int slot) const { return std::numeric_limits<int64_t>::max(); }
  // Tokens one close chunk runs (armt: the M memory tokens), charged to the step's token budget;
  // 0 for the families without segments.
  virtual int64_t close_tokens() const { return 0; }

  // State slots no sequence holds now (the runner's pool owns the free list).
  virtual int num_free_slots() const = 0;
  // Tokens the sequence in `slot` has run (cached prefix included): its next token's position.
  virtual int64_t position(int slot) const = 0;

  // Acquires a free slot and starts a sequence in it with `prompt` (≥ 1 token): resumes from the
  // longest cached prefix of whole segments, always leaving at least one prompt token to run.
  // RESOURCE_EXHAUSTED when no slot is free or the checkpoint store has no room for another sequence
  // now (the engine retries later); FAILED_PRECONDITION when it never could (the budgets are smaller
  // than one segment's pages).
  virtual absl::StatusOr<BeginResult> Begin(std::span<const int32_t> prompt) = 0;
  // Runs one batch (distinct slots, each begun; SequenceChunk: model.h) and returns each chunk's
  // last-token logits (a zero row for a close chunk), plus the prompt log-probs of chunks with
  // all_logits. A content chunk must fit in its slot's open segment (SegmentTokensLeft). After an error the
  // batch's sequences are in an undefined state: the caller ends them.
  virtual absl::StatusOr<StepOutput> Step(std::span<const SequenceChunk> batch) = 0;
  // Ends the sequence in `slot` (finished, cancelled or failed): releases its pages' references and
  // returns the slot to the free list.
  virtual void End(int slot) = 0;

  virtual RunnerStats stats() const = 0;
};

}  // namespace mcserve::engine
