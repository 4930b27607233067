// MemoryStage: a mixer's recurrent memory with or without Memory Caching. It runs the mixer's
// memory rule (memory_rule.h) over the batch and writes the raw read-out o = Sᵀq [T, Hs, V] that the
// mixer's output stage normalises: the online memory's alone when the layer does not cache,
// otherwise MC's aggregation of the online memory with the checkpoints of closed segments
// (docs/memory-caching.md), freezing a checkpoint after each segment's last token. Its work is split
// by concept: memory_stage.cc binds and dispatches, constant_segments.cc and log_segments.cc run the
// two segmentations, aggregate.cc and ssc_routed.cc read the checkpoints. Engine loop thread.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/mc/mc_config.h"
#include "engine/mc/memory_rule.h"
#include "engine/model/model_config.h"
#include "engine/runner/state_pool.h"
#include "engine/runner/weight_binder.h"
#include "kernels/core/batch_layout.h"
#include "kernels/core/context.h"

namespace mcserve::engine {

// What a mixer knows about the batch it runs: the device layout plus host copies of it.
struct MixerBatch {
  kernels::BatchLayout layout;     // device tensors: cu_seqlens [B+1], slot_ids [B]
  std::vector<int32_t> cu;         // [B + 1] host copy of cu_seqlens
  std::vector<int32_t> slots;      // [B] host copy of slot_ids
  std::vector<int64_t> positions;  // [B] tokens each sequence had processed before this batch
  CheckpointStore* checkpoints = nullptr;
};

// One pass's working set, rows of the batch that run together, and the pages a read-out reads
// (mc_pass.h; used by the stage's own files only).
struct McPass;
struct PieceEntry;
class SubBatch;
struct PageList;

class MemoryStage {
 public:
  struct Shape {
    int64_t q_heads = 0, k_heads = 0, state_heads = 0;  // each divides state_heads
    int64_t dk = 0, dv = 0;                             // dk: key dim as the memory sees it
    int64_t mlp_params = 0;  // MLP memories: P weights per head (a page is [state_heads, P]); 0: matrix
    std::vector<StateSpec> rule_states;  // the rule's state besides "memory" and Aux (MLP memories:
                                         // momentum, anchor); independent logarithmic MC copies it per level
  };
  struct Aux {
    std::string name;                    // the rule's auxiliary state ("momentum", "previous_kv"), or ""
    kernels::Shape per_slot;             // its shape per slot
    bool reset_at_segment_start = true;  // whether MC restarts it when a segment starts
  };
  // Levels of logarithmic segmentation: positions up to 2^kLevels − 1 tokens.
  static constexpr int kLevels = 24;

  // Binds layer `layer`: MC applies when config.memory_caching covers it. Errors name the layer for
  // combinations that are not supported (normalised linear attention, logarithmic segmentation).
  static absl::StatusOr<MemoryStage> Bind(const ModelConfig& config, const WeightBinder& w, int layer, Shape shape,
                                          Aux aux, bool normalized);
  // The state tensors this stage adds per slot (none without MC).
  void AddStateSpecs(std::vector<StateSpec>* specs) const;

  // Runs the mixer's memory `rule` over the batch and writes o [T, Hs, V]. x [T, hidden] is the
  // layer input (for u_proj); the rule's query() and keys() are the read-out query and pooled keys.
  absl::Status Run(const kernels::Context& ctx, const kernels::Tensor& x, const MemoryRule& rule,
                   const MixerBatch& batch, LayerState& state, kernels::Tensor* o) const;
  // Memory Caching over a decode step whose online memory has already run: `rule`'s memory step
  // (update and read-out) ran for every row, e.g. fused into DeltaDecode, and o [T, Hs, V] holds its
  // read-out. Pools the open segments, aggregates o with the checkpoints and freezes the segments the
  // step closes: what Run does after the rule. Only where AggregatesAfterOnline(), with one token per
  // sequence and a rule whose read-out does not need the online memory row by row (the matrix
  // memories'); Internal error otherwise.
  absl::Status RunAfterOnline(const kernels::Context& ctx, const kernels::Tensor& x, const MemoryRule& rule,
                              const MixerBatch& batch, LayerState& state, kernels::Tensor* o) const;
  // Whether RunAfterOnline takes a decode step: no MC, or MC with constant segments.
  bool AggregatesAfterOnline() const;
  // True when this layer caches (config.memory_caching covers it).
  bool caches() const { return mc_.has_value(); }

 private:
  // The read-out query q [T, Hq, dk] and the gate input (q, or u_proj x), both per state head.
  absl::StatusOr<std::pair<kernels::Tensor, kernels::Tensor>> QueryAndGate(const kernels::Context& ctx,
                                                                           const kernels::Tensor& x,
                                                                           const kernels::Tensor& q) const;

  // A caching layer's pass (`pass` with its q and u unset; x [T, hidden] the layer input): the read-out
  // query and gate, then the layer's segmentation.
  absl::Status RunCaching(McPass pass, const kernels::Tensor& x) const;

  // Constant segmentation (constant_segments.cc): pools the open segments, cuts the batch into
  // pieces that end where segments close, runs each piece and closes its segments. With
  // pass.online_done, the batch must be one piece per sequence (a decode step).
  absl::Status RunConstant(McPass& pass) const;
  absl::Status RunPiece(const McPass& pass, const SubBatch& piece) const;
  // Freezes the segment whose last row `entry` computed and, in independent mode, restarts the memory.
  absl::Status CloseSegment(const McPass& pass, const PieceEntry& entry) const;

  // Logarithmic segmentation (log_segments.cc): every token closes its online block, so tokens run
  // one at a time.
  absl::Status RunLogarithmic(McPass& pass) const;
  // One token: row `row` of sequence `seq`, position n.
  absl::Status RunLogToken(const McPass& pass, int seq, int64_t row, int64_t n) const;
  // Independent logarithmic segmentation: updates token n's active per-level compressors with row
  // `row` and returns the read-out of level `online_level` ([1, Hs, dv]) when it is among them.
  absl::StatusOr<std::optional<kernels::Tensor>> UpdateLevels(const McPass& pass, int slot, int64_t row, int64_t n,
                                                              int online_level) const;
  // The rule's state besides "memory" (Shape::rule_states and the Aux), copied per level.
  std::vector<StateSpec> RuleStates() const;
  // The rule's per-slot state tensors reshaped so that each (slot, level) is a slot of its own.
  absl::StatusOr<kernels::Tensor> LevelView(LayerState& state, const std::string& name) const;

  // Read-out (aggregate.cc): the rows of `rows` against their slots' checkpoints.
  absl::Status Aggregate(const McPass& pass, const SubBatch& rows) const;
  // Appends every checkpoint of (slot, layer) to list.pages, staged to the device where needed.
  absl::Status AppendPages(CheckpointStore& store, int slot, CheckpointList cps, std::vector<int32_t>& all,
                           PageList& list) const;
  // The rows of `rows` reading `list`; `cached` is the closed-segment count the mean's weights need.
  absl::Status Readout(const McPass& pass, const SubBatch& rows, const PageList& list, size_t cached) const;
  // SSC when some checkpoints are on the host tier (ssc_routed.cc): route first, stage only the
  // selected pages into the hot sets, then read them, in rounds that keep each hot set small.
  absl::Status AggregateRouted(const McPass& pass, const SubBatch& rows) const;

  // Shape of one checkpoint page (and of a slot's "memory"): [Hs, dk, dv] or [Hs, P].
  kernels::Shape PageShape() const;
  // Whether this aggregation keeps a running sum of checkpoints instead of pages: residual and the
  // mean for matrix memories (both linear in the memory), the mean only for MLP memories.
  bool SumsCheckpoints() const;

  int layer_ = 0;
  Shape shape_;
  Aux aux_;
  std::optional<McConfig> mc_;             // set when this layer caches
  std::optional<kernels::Tensor> u_proj_;  // [q_heads · dk, hidden]
};

}  // namespace mcserve::engine
