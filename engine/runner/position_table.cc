#include "engine/runner/position_table.h"

#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/runner/mixer_ops.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/gather_rows/gather_rows.h"

namespace mcserve::engine {

absl::StatusOr<PositionTable> PositionTable::Bind(const ModelConfig& c, const WeightBinder& w) {
  PositionTable p;
  p.limits_ = c.gam;
  MCSERVE_ASSIGN_OR_RETURN(p.table_, w.Matrix("pos_embedding.weight", {c.gam.block_size, c.hidden_size}));
  return p;
}

absl::Status PositionTable::Check(int64_t start, int64_t n) const {
  if (limits_.clamp_positions || start + n <= limits_.block_size) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "gam: position ", start + n - 1, " is past the learned position table (block_size = ", limits_.block_size,
      " tokens); set position_overflow: clamp to run longer sequences (untrained behaviour)"));
}

int32_t PositionTable::Row(int64_t t) const {
  return static_cast<int32_t>(t < limits_.block_size ? t : limits_.overflow_position);
}

absl::Status PositionTable::Add(const kernels::Context& ctx, const MixerBatch& batch, kernels::Tensor& h) const {
  absl::InlinedVector<int32_t, 64> rows;  // [T], inline for a decode batch
  for (size_t b = 0; b + 1 < batch.cu.size(); ++b) {
    for (int32_t r = batch.cu[b]; r < batch.cu[b + 1]; ++r) rows.push_back(Row(batch.positions[b] + r - batch.cu[b]));
  }
  MCSERVE_ASSIGN_OR_RETURN(kernels::Tensor ids,
                           kernels::Tensor::FromHostI32(rows, {static_cast<int64_t>(rows.size())}, ctx.device));
  MCSERVE_ASSIGN_OR_RETURN(kernels::Tensor pos, NewF32(ctx, h.shape()));  // [T, H]
  MCSERVE_RETURN_IF_ERROR(kernels::GatherRows(ctx, {.table = &table_, .ids = &ids, .out = &pos}));
  return kernels::Add(ctx, {.a = &h, .b = &pos, .out = &h});
}

}  // namespace mcserve::engine
