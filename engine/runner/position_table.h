// PositionTable: learned absolute position embeddings added to the token embeddings (gam's
// pos_embedding). Position p(t) = t below block_size; beyond, an error naming the limit, or with
// position_overflow: clamp, overflow_position. Bound while loading; used by Model::Forward on the
// engine loop thread.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "engine/mc/memory_stage.h"
#include "engine/model/model_config.h"
#include "engine/runner/weight_binder.h"
#include "kernels/core/context.h"
#include "kernels/core/tensor.h"

namespace mcserve::engine {

class PositionTable {
 public:
  // Binds `pos_embedding.weight` [block_size, hidden] for a gam config.
  static absl::StatusOr<PositionTable> Bind(const ModelConfig& c, const WeightBinder& w);

  // OK, or InvalidArgument naming block_size when tokens [start, start + n) reach a position past the
  // table and positions are not clamped.
  absl::Status Check(int64_t start, int64_t n) const;
  // The table row of token position t: t, or overflow_position for t ≥ block_size (clamp).
  int32_t Row(int64_t t) const;
  // h [T, H] += table[p(t)] for every row of `batch` (sequence b's rows start at positions[b]).
  absl::Status Add(const kernels::Context& ctx, const MixerBatch& batch, kernels::Tensor& h) const;

 private:
  kernels::Tensor table_;  // [block_size, H]
  GamConfig limits_;
};

}  // namespace mcserve::engine
