// MemoryRule: what MemoryStage needs of a layer's memory to apply Memory Caching to it — run the
// update rule with its online read-out over rows of the batch, read cached checkpoints into the
// read-out, and restart a slot's memory at a segment start. A rule is one memory family: LinearRule
// (linear_rule.h) drives the matrix memories (kernels/linear_memory, kernels/mc_readout), DeepRule
// (deep_rule.h) the MLP memories (kernels/deep_memory). A mixer builds its rule per forward pass
// around that pass's inputs and hands it to MemoryStage::Run. Adding a family: docs/memory-caching.md,
// "Adding a memory family". Engine loop thread.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/mc/mc_config.h"
#include "engine/runner/state_pool.h"
#include "kernels/core/batch_layout.h"
#include "kernels/core/context.h"
#include "kernels/core/tensor.h"
#include "kernels/mc_readout/mc_readout.h"

namespace mcserve::engine {

// A read-out of rows of the batch against per-row page lists (CSR), into `out`, which holds the
// online read-out o_on on entry. A page is the kernels' kernels::McPage: a checkpoint (memory and
// pooled key) or a slot's running sum of them (memory only, pooled_key null).
struct McRead {
  const McConfig* mc = nullptr;
  size_t cached = 0;                       // closed segments behind a running sum (mean's weights)
  const kernels::Tensor* q = nullptr;      // [R, Hs, K] read-out query
  const kernels::Tensor* u = nullptr;      // [R, Hs, K] gate input
  const kernels::Tensor* pools = nullptr;  // [R, Hs, K] the open segment's pool after each row
  std::span<const kernels::McPage> pages;
  const kernels::Tensor* offsets = nullptr;      // [R + 1] I32: row r reads token_pages[offsets[r]..offsets[r+1])
  const kernels::Tensor* token_pages = nullptr;  // [E] I32 indices into pages
  kernels::BatchLayout layout;             // the rows as sequences in slots (soup reads the online weights)
  LayerState* state = nullptr;
  kernels::Tensor* out = nullptr;          // [R, Hs, V]: o_on in, the aggregate out
};

class MemoryRule {
 public:
  virtual ~MemoryRule() = default;
  // This pass's read-out query [T, Hq, dk] (the gate input with gate q) and keys [T, Hk, dk] (pooled
  // per segment), exactly as the memory sees them.
  const kernels::Tensor& query() const { return *query_; }
  const kernels::Tensor& keys() const { return *keys_; }
  // Runs the rule over `rows` of this pass's inputs (in that order; a row may repeat), grouped as the
  // sequences of `layout` (sequence i's first row had first_positions[i] tokens before it in its
  // memory), reading the online memory after each row's write into out [rows, Hs, V]. `state` holds
  // the tensors the rule updates under their usual names ("memory", ...), one slot per sequence.
  virtual absl::Status Run(const kernels::Context& ctx, std::span<const int32_t> rows,
                           const kernels::BatchLayout& layout, std::span<const int64_t> first_positions,
                           LayerState& state, kernels::Tensor* out) const = 0;
  // Aggregates the online read-out with the pages per row (mc.aggregation's rule).
  virtual absl::Status Read(const kernels::Context& ctx, const McRead& read) const = 0;
  // Restarts `slot`'s memory (and the state that restarts with it) as a new segment begins in
  // independent init mode.
  virtual absl::Status Restart(const kernels::Context& ctx, int slot, LayerState& state) const = 0;
  // True when the read-out needs the online memory as it is after each row (one row per sequence
  // per read): the MLP memories' soup.
  virtual bool ReadsOnlineWeights(McAggregation aggregation) const { return false; }

 protected:
  // `query` and `keys` are the pass's inputs (above); they outlive the rule.
  MemoryRule(const kernels::Tensor* query, const kernels::Tensor* keys) : query_(query), keys_(keys) {}

 private:
  const kernels::Tensor* query_;
  const kernels::Tensor* keys_;
};

// Rows `rows` of a per-row input t [T, ...]: a view when they are consecutive, else a gathered copy
// kept in `keep` (which must not reallocate while the result is in use); null for null.
absl::StatusOr<const kernels::Tensor*> SelectRows(const kernels::Context& ctx, const kernels::Tensor* t,
                                                  std::span<const int32_t> rows, kernels::TensorList& keep);

// Points every non-null *field (a per-row input [T, ...]) at its rows `rows` (SelectRows). `keep` is
// cleared and holds the gathered copies; it must outlive the fields' use.
absl::Status SelectRowsOf(const kernels::Context& ctx, std::span<const int32_t> rows,
                          std::initializer_list<const kernels::Tensor**> fields, kernels::TensorList& keep);

// Row indices of a pass, up to 64 inline (a decode batch) so that building them does not allocate.
using RowList = absl::InlinedVector<int32_t, 64>;

// Rows [begin, end).
RowList RowRange(int64_t begin, int64_t end);

}  // namespace mcserve::engine
