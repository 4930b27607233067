// The working set of one MemoryStage pass, shared by the stage's files (memory_stage.h): what every
// step of a pass reads (McPass), the rows of the batch that run or read together with their device
// layout built once (SubBatch), and the pages a read-out reads (PageList). Engine loop thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/mc/memory_rule.h"
#include "engine/mc/memory_stage.h"
#include "kernels/core/batch_layout.h"
#include "kernels/core/context.h"
#include "kernels/core/tensor.h"
#include "kernels/mc_readout/mc_readout.h"

namespace mcserve::engine {

// One forward pass of a caching layer: the mixer's rule over `batch`, writing `out` [T, Hs, V].
struct McPass {
  const kernels::Context& ctx;
  const MemoryRule& rule;
  const MixerBatch& batch;
  LayerState& state;
  kernels::Tensor* out = nullptr;
  kernels::Tensor q;      // [T, Hs, dk] the read-out query per state head
  kernels::Tensor u;      // [T, Hs, dk] the gate input per state head
  kernels::Tensor pools;  // [T, Hs, dk] the open segment's pool after each row
  bool online_done = false;  // the rule's memory step already ran for every row (out holds o_on)
};

// A run of rows [begin, end) of sequence `seq` of the batch.
struct PieceEntry {
  int seq;        // index in the batch
  int64_t begin;  // rows [begin, end) of the batch
  int64_t end;
  bool closes;    // the last row closes a segment
};

// A batch layout on the device from host copies of cu_seqlens [B + 1] and slot_ids [B]: the one
// place a sub-batch's layout is uploaded.
struct DeviceLayout {
  kernels::Tensor cu, slots;
  static absl::StatusOr<DeviceLayout> Upload(const kernels::Context& ctx, std::span<const int32_t> cu,
                                             std::span<const int32_t> slots);
  kernels::BatchLayout view() const { return {.cu_seqlens = &cu, .slot_ids = &slots}; }
};

// Rows [begin, end) of a batch that run through the memory (or read their checkpoints) together: runs
// of its sequences' rows, in row order, as sequences in their slots. Built once per piece and reused
// by every step that reads it.
class SubBatch {
 public:
  // The whole batch, one entry per sequence: its own layout and positions, nothing uploaded or
  // copied (`entries` and `batch` must outlive the SubBatch).
  static SubBatch Whole(const MixerBatch& batch, std::span<const PieceEntry> entries);
  // `entries` (consecutive runs, in row order): their layout uploaded once. One entry (a decode
  // step's sequence read alone) allocates nothing on the host.
  static absl::StatusOr<SubBatch> Of(const kernels::Context& ctx, const MixerBatch& batch,
                                     absl::Span<const PieceEntry> entries);

  std::span<const PieceEntry> entries() const {
    return whole_ ? whole_entries_ : std::span<const PieceEntry>(own_entries_);
  }
  int64_t begin() const { return begin_; }
  int64_t end() const { return end_; }
  // The rows as sequences in slots (cu_seqlens relative to begin).
  kernels::BatchLayout layout() const { return own_ ? own_->view() : batch_->layout; }
  // Tokens each entry's sequence had in its memory before the entry's first row.
  std::span<const int64_t> first_positions() const {
    return whole_ ? std::span<const int64_t>(batch_->positions) : std::span<const int64_t>(own_positions_);
  }

 private:
  const MixerBatch* batch_ = nullptr;
  bool whole_ = false;
  std::span<const PieceEntry> whole_entries_;          // Whole: the caller's
  absl::InlinedVector<PieceEntry, 1> own_entries_;    // Of
  int64_t begin_ = 0, end_ = 0;
  absl::InlinedVector<int64_t, 1> own_positions_;     // Of
  std::optional<DeviceLayout> own_;  // unset for the whole batch
};

// The pages a read-out reads and which of them each row reads (CSR over the rows).
struct PageList {
  std::vector<kernels::McPage> pages;
  std::vector<int32_t> offsets = {0};  // [rows + 1]
  std::vector<int32_t> token_pages;    // indices into pages
};

}  // namespace mcserve::engine
