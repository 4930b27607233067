// Constant segmentation (memory_stage.h): the open segment's pool after every row, the batch cut
// into pieces that end where a segment closes (so each checkpoint is frozen exactly at its boundary,
// B.6.2), each piece run through the rule and aggregated, and the closed segments frozen.
#include <vector>

#include "base/status_macros.h"
#include "engine/mc/mc_pass.h"
#include "engine/mc/segmentation.h"
#include "engine/runner/mixer_ops.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/mc_pool/mc_pool.h"

namespace mcserve::engine {

using kernels::Tensor;

absl::Status MemoryStage::RunConstant(McPass& pass) const {
  const MixerBatch& batch = pass.batch;
  const int64_t c = mc_->segment_size, hs = shape_.state_heads;
  const int num_seqs = static_cast<int>(batch.slots.size());
  // Kept per thread across calls (the engine loop thread's): a decode step allocates nothing.
  thread_local std::vector<int32_t> first_local;
  thread_local std::vector<PieceEntry> pieces;  // every sequence's runs, sequence by sequence
  // Pool of the open segment after every row.
  first_local.resize(num_seqs);
  for (int b = 0; b < num_seqs; ++b) first_local[b] = static_cast<int32_t>(LocalIndex(batch.positions[b] + 1, c));
  MCSERVE_ASSIGN_OR_RETURN(Tensor first_t, Tensor::FromHostI32(first_local, {num_seqs}, pass.ctx.device));
  MCSERVE_ASSIGN_OR_RETURN(pass.pools, NewF32(pass.ctx, {pass.out->dim(0), hs, shape_.dk}));
  MCSERVE_RETURN_IF_ERROR(kernels::McSegmentPool(
      pass.ctx, {.k = &pass.rule.keys(), .layout = batch.layout, .first_local = &first_t, .segment_size = c,
                 .mean = mc_->pool == McPool::kMean, .pool_sum = &pass.state.at("mc_pool_sum"), .out = &pass.pools}));
  // Split every sequence after each row that closes a segment, and after every row that reads a
  // cached segment when the read-out needs the online memory as each row leaves it.
  const bool row_by_row = pass.rule.ReadsOnlineWeights(mc_->aggregation);
  pieces.clear();
  bool crosses_inside = false;
  for (int b = 0; b < num_seqs; ++b) {
    const size_t first_piece = pieces.size();
    int64_t begin = batch.cu[b];
    for (int64_t r = batch.cu[b]; r < batch.cu[b + 1]; ++r) {
      const int64_t n = batch.positions[b] + (r - batch.cu[b]) + 1;  // the row's token number
      const bool closes = ClosesSegment(n, c);
      if (closes || (row_by_row && n > c) || r + 1 == batch.cu[b + 1]) {
        pieces.push_back({b, begin, r + 1, closes});
        begin = r + 1;
      }
    }
    crosses_inside |= pieces.size() - first_piece > 1;
  }
  if (!crosses_inside) return RunPiece(pass, SubBatch::Whole(batch, pieces));
  if (pass.online_done) return absl::InternalError("a pass whose online memory already ran crosses a segment");
  for (const PieceEntry& e : pieces) {
    MCSERVE_ASSIGN_OR_RETURN(SubBatch piece, SubBatch::Of(pass.ctx, batch, {e}));
    MCSERVE_RETURN_IF_ERROR(RunPiece(pass, piece));
  }
  return absl::OkStatus();
}

absl::Status MemoryStage::RunPiece(const McPass& pass, const SubBatch& piece) const {
  // 1. The online memory over the piece's rows (unless it already ran: RunAfterOnline).
  if (!pass.online_done) {
    Tensor out_rows = pass.out->Rows(piece.begin(), piece.end());
    MCSERVE_RETURN_IF_ERROR(pass.rule.Run(pass.ctx, RowRange(piece.begin(), piece.end()), piece.layout(),
                                          piece.first_positions(), pass.state, &out_rows));
  }

  // 2. Aggregate with the closed segments. The mean's weights differ per sequence, so it reads one
  // sequence at a time; the other aggregations read the whole piece at once.
  if (mc_->aggregation == McAggregation::kMean && piece.entries().size() > 1) {
    for (const PieceEntry& e : piece.entries()) {
      MCSERVE_ASSIGN_OR_RETURN(SubBatch one, SubBatch::Of(pass.ctx, pass.batch, {e}));
      MCSERVE_RETURN_IF_ERROR(Aggregate(pass, one));
    }
  } else {
    MCSERVE_RETURN_IF_ERROR(Aggregate(pass, piece));
  }

  // 3. Freeze the segments whose last token this piece computed.
  for (const PieceEntry& e : piece.entries()) {
    if (e.closes) MCSERVE_RETURN_IF_ERROR(CloseSegment(pass, e));
  }
  return absl::OkStatus();
}

absl::Status MemoryStage::CloseSegment(const McPass& pass, const PieceEntry& e) const {
  const MixerBatch& batch = pass.batch;
  LayerState& state = pass.state;
  const int slot = batch.slots[e.seq];
  const int64_t last_token = batch.positions[e.seq] + (e.end - batch.cu[e.seq]);
  MCSERVE_ASSIGN_OR_RETURN(Tensor memory, state.at("memory").Rows(slot, slot + 1).Reshape(PageShape()));
  MCSERVE_ASSIGN_OR_RETURN(Tensor pooled, pass.pools.Rows(e.end - 1, e.end).Reshape({shape_.state_heads, shape_.dk}));
  const Segment segment{last_token - mc_->segment_size + 1, last_token, 0};
  if (SumsCheckpoints()) {
    // Read only through the running sum: O(1) state per request (B.8).
    Tensor sum = state.at("mc_sum").Rows(slot, slot + 1);
    MCSERVE_ASSIGN_OR_RETURN(Tensor flat, memory.Reshape(sum.shape()));
    MCSERVE_RETURN_IF_ERROR(kernels::Add(pass.ctx, {.a = &sum, .b = &flat, .out = &sum}));
  } else {
    MCSERVE_RETURN_IF_ERROR(batch.checkpoints->Freeze(slot, layer_, memory, pooled, segment));
  }
  if (mc_->init_mode == McInitMode::kIndependent) MCSERVE_RETURN_IF_ERROR(pass.rule.Restart(pass.ctx, slot, state));
  if (!aux_.name.empty() && aux_.reset_at_segment_start) MCSERVE_RETURN_IF_ERROR(ZeroSlot(state.at(aux_.name), slot));
  return absl::OkStatus();
}

}  // namespace mcserve::engine
