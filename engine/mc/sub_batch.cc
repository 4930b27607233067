// SubBatch and DeviceLayout (mc_pass.h).
#include "absl/container/inlined_vector.h"
#include "base/status_macros.h"
#include "engine/mc/mc_pass.h"

namespace mcserve::engine {

using kernels::Context;
using kernels::Tensor;

absl::StatusOr<DeviceLayout> DeviceLayout::Upload(const Context& ctx, std::span<const int32_t> cu,
                                                  std::span<const int32_t> slots) {
  DeviceLayout d;
  MCSERVE_ASSIGN_OR_RETURN(d.cu, Tensor::FromHostI32(cu, {static_cast<int64_t>(cu.size())}, ctx.device));
  MCSERVE_ASSIGN_OR_RETURN(d.slots, Tensor::FromHostI32(slots, {static_cast<int64_t>(slots.size())}, ctx.device));
  return d;
}

SubBatch SubBatch::Whole(const MixerBatch& batch, std::span<const PieceEntry> entries) {
  SubBatch s;
  s.batch_ = &batch;
  s.whole_ = true;
  s.whole_entries_ = entries;
  s.begin_ = 0;
  s.end_ = batch.cu.empty() ? 0 : batch.cu.back();
  return s;
}

absl::StatusOr<SubBatch> SubBatch::Of(const Context& ctx, const MixerBatch& batch,
                                      absl::Span<const PieceEntry> entries) {
  SubBatch s;
  s.batch_ = &batch;
  s.own_entries_.assign(entries.begin(), entries.end());
  s.begin_ = entries.front().begin;
  s.end_ = entries.back().end;
  absl::InlinedVector<int32_t, 8> cu = {0}, slots;
  for (const PieceEntry& e : entries) {
    cu.push_back(static_cast<int32_t>(e.end - s.begin_));
    slots.push_back(batch.slots[e.seq]);
    s.own_positions_.push_back(batch.positions[e.seq] + (e.begin - batch.cu[e.seq]));
  }
  MCSERVE_ASSIGN_OR_RETURN(s.own_, DeviceLayout::Upload(ctx, cu, slots));
  return s;
}

}  // namespace mcserve::engine
