// RecurrentRunner: the ModelRunner over a loaded Model — its StatePool (one slot per running
// sequence), the slots' CheckpointStore, and the PrefixCache that lets a request whose prompt starts
// with cached whole blocks resume there (in both MC init modes, and for models without MC, which then
// keep block-boundary states only for reuse). Engine loop thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/runner/model.h"
#include "engine/serving/model_runner.h"
#include "engine/serving/prefix_cache.h"

namespace mcserve::engine {

struct RecurrentRunnerOptions {
  int num_slots = 16;
  CheckpointStoreOptions checkpoints;
  bool prefix_caching = true;
  // Tokens per prefix block: rounded up to a multiple of the MC segment size (constant segmentation)
  // or of armt's segment_size (its snapshots are taken right after a segment close).
  int64_t prefix_block = 64;
  int64_t prefix_cache_bytes = int64_t{1} << 30;  // host bytes of cached boundary states; -1 = unlimited
};

class RecurrentRunner : public ModelRunner {
 public:
  // `model` must outlive the runner. InvalidArgument for a bad option (slots < 1, prefix_block < 1).
  static absl::StatusOr<std::unique_ptr<RecurrentRunner>> Create(const Model* model,
                                                                 const RecurrentRunnerOptions& options);

  int num_slots() const override { return pool_.num_slots(); }
  int vocab_size() const override;
  int64_t boundary_tokens() const override { return cache_ ? cache_->block_tokens() : 0; }
  int64_t max_positions() const override { return model_->config().max_positions(); }
  int64_t SegmentTokensLeft(int slot) const override { return model_->SegmentTokensLeft(pool_, slot); }
  int64_t close_tokens() const override { return model_->close_tokens(); }
  int num_free_slots() const override { return pool_.num_free(); }
  int64_t position(int slot) const override { return pool_.position(slot); }
  absl::StatusOr<BeginResult> Begin(std::span<const int32_t> prompt) override;
  absl::StatusOr<StepOutput> Step(std::span<const SequenceChunk> batch) override;
  void End(int slot) override;
  RunnerStats stats() const override;

  // Store and cache invariants (reference counts, bytes), for tests and debug builds.
  absl::Status SanityCheck() const;
  const StatePool& pool() const { return pool_; }

 private:
  struct Sequence {
    std::vector<int32_t> tokens;            // everything the slot has run (prompt first)
    int64_t prompt_tokens = 0;
    PrefixCache::Entry* last = nullptr;     // the chain entry of the last snapshotted block
    bool chain_broken = false;              // a block ended inside a step: no further snapshots
  };
  RecurrentRunner(const Model* model, StatePool pool) : model_(model), pool_(std::move(pool)) {}
  // The position at which `slot` is next snapshotted (the end of its next prompt block), or -1.
  int64_t NextSnapshotAt(int slot) const;
  // After a forward pass: snapshot the slot when it sits exactly at the end of a prompt block.
  absl::Status MaybeSnapshot(int slot);
  absl::StatusOr<std::vector<LayerSnapshot>> Snapshot(int slot);
  absl::Status Restore(int slot, const PrefixCache::Entry& entry);
  // Bytes a sequence's next closed segment adds to the store (all MC layers).
  int64_t SegmentPageBytes() const;
  // Upper bound of the pages a slot at `position` freezes running `tokens` more (per MC layer).
  int64_t PagesFrozen(int64_t position, int64_t tokens) const;
  // The store owns no eviction policy: before a forward pass over `chunks` the runner drops prefix-
  // cache entries (least recently used first) until the pages the pass may freeze fit, or none is left.
  void MakeRoom(std::span<const SequenceChunk> chunks);

  const Model* model_;
  StatePool pool_;
  std::unique_ptr<PrefixCache> cache_;  // null when prefix caching is off
  std::vector<Sequence> sequences_;     // [num_slots]
  std::vector<int64_t> page_bytes_;     // [MC layers] memory bytes of one page of each
  int64_t prefix_hits_ = 0, prefix_misses_ = 0, prefix_cached_tokens_ = 0;
};

}  // namespace mcserve::engine
