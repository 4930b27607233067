// MemoryStage: a mixer's recurrent memory with or without Memory Caching. It runs the update rule
// over the batch and writes the raw read-out o = Sᵀq [T, Hs, V] that the mixer's output stage
// normalises: the online memory's alone when the layer does not cache, otherwise MC's aggregation
// of the online memory with the checkpoints of closed segments (docs/memory-caching.md), freezing a
// checkpoint after each segment's last token. Scheduler thread.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/model_config.h"
#include "engine/mc/memory_rule.h"
#include "engine/runner/state_pool.h"
#include "engine/runner/weight_binder.h"
#include "kernels/core/context.h"
#include "kernels/linear_memory/linear_memory.h"

namespace mcserve::engine {

// What a mixer knows about the batch it runs: the device layout plus host copies of it.
struct MixerBatch {
  kernels::BatchLayout layout;     // device tensors: cu_seqlens [B+1], slot_ids [B]
  std::vector<int32_t> cu;         // [B + 1] host copy of cu_seqlens
  std::vector<int32_t> slots;      // [B] host copy of slot_ids
  std::vector<int64_t> positions;  // [B] tokens each sequence had processed before this batch
  CheckpointStore* checkpoints = nullptr;
};

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

  // Runs `memory` (rule, q, k, v and gates set by the caller; layout, state, aux and out are set
  // here) over the batch and writes o [T, Hs, V]. x [T, hidden] is the layer input (for u_proj).
  absl::Status Run(const kernels::Context& ctx, const kernels::Tensor& x, kernels::LinearMemoryArgs memory,
                   const MixerBatch& batch, LayerState& state, kernels::Tensor* o) const;
  // The same for any memory `rule` (constant segmentation with MC, or none): q [T, Hq, dk] is the
  // read-out query (the gate input with gate q), k [T, Hk, dk] the keys pooled per segment.
  absl::Status Run(const kernels::Context& ctx, const kernels::Tensor& x, const MemoryRule& rule,
                   const kernels::Tensor& q, const kernels::Tensor& k, const MixerBatch& batch, LayerState& state,
                   kernels::Tensor* o) const;
  // True when this layer caches (config.memory_caching covers it).
  bool caches() const { return mc_.has_value(); }

 private:
  struct Piece;
  // The read-out query q [T, Hq, dk] and the gate input (q, or u_proj x), both per state head.
  absl::StatusOr<std::pair<kernels::Tensor, kernels::Tensor>> QueryAndGate(const kernels::Context& ctx,
                                                                           const kernels::Tensor& x,
                                                                           const kernels::Tensor& q) const;
  struct PieceEntry {
    int seq;        // index in the batch
    int64_t begin;  // rows [begin, end) of the batch
    int64_t end;
    bool closes;    // the last row closes a segment
  };
  absl::Status RunCached(const kernels::Context& ctx, const kernels::Tensor& x, const MemoryRule& rule,
                         const kernels::Tensor& q_in, const kernels::Tensor& k, const MixerBatch& batch,
                         LayerState& state, kernels::Tensor* o) const;
  absl::Status RunLogarithmic(const kernels::Context& ctx, const kernels::Tensor& x, const MemoryRule& rule,
                              const kernels::Tensor& q_in, const kernels::Tensor& k, const MixerBatch& batch,
                              LayerState& state, kernels::Tensor* o) const;
  // Logarithmic segmentation, one token (row `row` of sequence `seq`, position n).
  absl::Status RunLogToken(const kernels::Context& ctx, const MemoryRule& rule, const MixerBatch& batch, int seq,
                           int64_t row, int64_t n, const kernels::Tensor& q, const kernels::Tensor& u,
                           const kernels::Tensor& pools, LayerState& state, kernels::Tensor* o) const;
  // Independent logarithmic segmentation: updates token n's active per-level compressors with row
  // `row` and returns the read-out of level `online_level` ([1, Hs, dv]) when it is among them.
  absl::StatusOr<std::optional<kernels::Tensor>> UpdateLevels(const kernels::Context& ctx, const MemoryRule& rule,
                                                              int slot, int64_t row, int64_t n, int online_level,
                                                              LayerState& state) const;
  // The rule's state besides "memory" (Shape::rule_states and the Aux), copied per level.
  std::vector<StateSpec> RuleStates() const;
  absl::Status RunPiece(const kernels::Context& ctx, const Piece& piece, const MixerBatch& batch,
                        const MemoryRule& rule, const kernels::Tensor& q, const kernels::Tensor& u,
                        const kernels::Tensor& pools, LayerState& state, kernels::Tensor* o) const;
  // The read-out of rows [begin, end) (the rows of `entries`) against their slots' checkpoints.
  absl::Status Aggregate(const kernels::Context& ctx, const MemoryRule& rule, std::span<const PieceEntry> entries,
                         int64_t begin, int64_t end, const MixerBatch& batch, const kernels::Tensor& q,
                         const kernels::Tensor& u, const kernels::Tensor& pools, LayerState& state,
                         kernels::Tensor* o) const;
  // The read-out of rows [begin, end) (sequences `entries`): token begin + t reads
  // pages[token_pages[offsets[t] .. offsets[t + 1])]; `cached` is the closed-segment count the
  // mean's weights need.
  absl::Status Readout(const kernels::Context& ctx, const MemoryRule& rule, std::span<const PieceEntry> entries,
                       int64_t begin, int64_t end, const MixerBatch& batch, std::span<const McPageRef> pages,
                       std::span<const int32_t> offsets, std::span<const int32_t> token_pages, size_t cached,
                       const kernels::Tensor& q, const kernels::Tensor& u, const kernels::Tensor& pools,
                       LayerState& state, kernels::Tensor* o) const;
  // SSC when some checkpoints are on the host tier (ssc_routed.cc): route first, stage only
  // the selected pages into the hot sets, then read them, in rounds that keep each hot set small.
  absl::Status AggregateRouted(const kernels::Context& ctx, const MemoryRule& rule,
                               std::span<const PieceEntry> entries, int64_t begin, int64_t end,
                               const MixerBatch& batch, const kernels::Tensor& q, const kernels::Tensor& u,
                               const kernels::Tensor& pools, LayerState& state, kernels::Tensor* o) const;
  // Freezes slot's segment ending at `last_token` (its pool is row `row` of pools) and, in
  // independent mode, restarts the memory.
  absl::Status CloseSegment(const kernels::Context& ctx, const MemoryRule& rule, int slot, int64_t last_token,
                            int64_t row, const kernels::Tensor& pools, CheckpointStore& store,
                            LayerState& state) const;
  // Shape of one checkpoint page (and of a slot's "memory"): [Hs, dk, dv] or [Hs, P].
  kernels::Shape PageShape() const;
  // Whether this aggregation keeps a running sum of checkpoints instead of pages: residual and the
  // mean for matrix memories (both linear in the memory), the mean only for MLP memories.
  bool SumsCheckpoints() const;
  // The rule's per-slot state tensors reshaped so that each (slot, level) is a slot of its own.
  absl::StatusOr<kernels::Tensor> LevelView(LayerState& state, const std::string& name) const;

  int layer_ = 0;
  Shape shape_;
  Aux aux_;
  std::optional<McConfig> mc_;          // set when this layer caches
  std::optional<kernels::Tensor> u_proj_;  // [q_heads · dk, hidden]
};

}  // namespace mcserve::engine
