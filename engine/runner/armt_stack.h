// ArmtStack: ARMT's network below the final LayerNorm (docs/model-format.md, `armt`): the inputs
// (token rows from wte, memory-token rows from `memory`, plus learned positions that restart every
// segment) and the layers (armt_layer.h). A Forward mixes content chunks (tokens that fit in their
// slot's open segment) and close chunks (SequenceChunk::close_segment: the M memory rows run
// against the slot's KV cache, every layer writes its memory, the KV is freed: c = 0, w += 1).
// Bound while loading; Forward from the engine loop thread.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/model_config.h"
#include "engine/model/weights.h"
#include "engine/runner/armt_layer.h"
#include "engine/runner/state_pool.h"
#include "engine/runner/weight_binder.h"
#include "kernels/core/context.h"
#include "kernels/core/tensor.h"

namespace mcserve::engine {

struct SequenceChunk;

// The host lists of one Forward: per-row table ids and positions, the layout and cached counts
// per chunk, the close chunks' rows, layout and first-write flags.
struct ArmtHostRows {
  std::vector<int32_t> ids, positions, cu = {0}, slots, cached;
  std::vector<int32_t> close_rows, close_cu = {0}, close_slots, close_first;
};

// The official state_dict's aliases, when stored: `memory_cell.model.lm_head.weight` must equal wte
// (tied) and every `memory_cell.layers.{i}.<rest>` its `memory_cell.model.transformer.h.{i}.<rest>`;
// InvalidArgument naming both otherwise. Aliases are never bound (nor counted as parameters).
absl::Status CheckArmtAliases(const WeightStore& store);

class ArmtStack {
 public:
  // Binds the embeddings, positions, memory rows and every layer (official names).
  static absl::StatusOr<ArmtStack> Bind(const ModelConfig& c, const WeightBinder& w);

  // Per layer, the state one slot needs (ArmtLayer::StateSpecs).
  std::vector<std::vector<StateSpec>> StateSpecs() const;
  // wte [vocab, D] (F32, on the device): the tied LM head.
  const kernels::Tensor& token_embeddings() const { return wte_; }
  // Content tokens `slot` may still run before its segment must close (S − c; 0: close first).
  int64_t TokensLeft(const StatePool& pool, int slot) const;

  // The chunks checked against their slots' open segments: a content chunk must fit (c + n ≤ S),
  // a close chunk has no tokens and closes a full segment (c = S). InvalidArgument otherwise.
  absl::Status CheckChunks(std::span<const SequenceChunk> chunks, const StatePool& pool) const;
  // Runs the chunks (checked) and returns the residual stream h [T, D] of all their rows (content
  // chunks' token rows, close chunks' M memory rows, in chunk order); updates the slots' state and
  // counters (content: position += n; close: closed_segments += 1).
  absl::StatusOr<kernels::Tensor> Forward(const kernels::Context& ctx, std::span<const SequenceChunk> chunks,
                                          StatePool& pool) const;

 private:
  // The rows of `chunks` (checked) at the slots' current progress.
  ArmtHostRows Plan(std::span<const SequenceChunk> chunks, const StatePool& pool) const;
  // The open segment's length c of `slot`.
  int64_t OpenLength(const StatePool& pool, int slot) const;
  // h [T, D] = the input rows: table row ids [T] (tokens, or vocab + j for memory row j) plus
  // positions [T] (wpe rows).
  absl::StatusOr<kernels::Tensor> Inputs(const kernels::Context& ctx, const kernels::Tensor& ids,
                                         const kernels::Tensor& positions) const;

  int64_t segment_ = 0, mem_ = 0, n_positions_ = 0, vocab_ = 0, d_ = 0;
  bool wrap_pos_ = false;           // memory rows at positions n_positions .. + M − 1
  kernels::Tensor inputs_;          // [vocab + M, D] F32: wte rows, then the memory rows
  kernels::Tensor wte_;             // [vocab, D] view of inputs_
  kernels::Tensor wpe_;             // [Np, D] (Np = n_positions, + M with wrap_pos)
  std::vector<ArmtLayer> layers_;
};

}  // namespace mcserve::engine
