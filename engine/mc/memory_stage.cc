#include "engine/mc/memory_stage.h"

#include "absl/strings/str_cat.h"
#include "engine/mc/segmentation.h"
#include "engine/runner/mixer_ops.h"
#include "base/status_macros.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/mc_pool/mc_pool.h"
#include "kernels/linear_memory/linear_memory.h"

namespace mcserve::engine {

using kernels::Context;
using kernels::Tensor;

// Rows of one batch that run through the memory together before any segment closes: either the
// whole batch (no sequence crosses a boundary before its last row) or a run of one sequence.
struct MemoryStage::Piece {
  using Entry = PieceEntry;
  std::vector<Entry> entries;
  bool whole_batch = false;
};


absl::StatusOr<MemoryStage> MemoryStage::Bind(const ModelConfig& c, const WeightBinder& w, int layer, Shape shape,
                                              Aux aux, bool normalized) {
  MemoryStage m;
  m.layer_ = layer;
  m.shape_ = shape;
  m.aux_ = std::move(aux);
  if (!c.memory_caching || !c.memory_caching->AppliesTo(layer)) return m;
  McConfig mc = *c.memory_caching;
  const std::string where = absl::StrCat("layer ", layer, ": Memory Caching ");
  if (normalized) {
    return absl::UnimplementedError(where + "on normalised linear attention (norm_feature_map) is not supported");
  }
  // Logarithmic segments restart per-level compressors (independent) or nothing (checkpoint); an
  // auxiliary state that must behave otherwise (SWLA's swla_cross_boundary) has no defined meaning.
  if (mc.segmentation == McSegmentation::kLogarithmic && !m.aux_.name.empty() &&
      m.aux_.reset_at_segment_start != (mc.init_mode == McInitMode::kIndependent)) {
    return absl::UnimplementedError(where + "with logarithmic segments needs swla_cross_boundary = "
                                            "(init_mode == checkpoint)");
  }
  const std::string u_name = absl::StrCat("model.layers.", layer, ".attn.mc.u_proj.weight");
  if (!mc.gate) mc.gate = w.Has(u_name) ? McGate::kUProj : McGate::kQ;
  if (*mc.gate == McGate::kUProj) {
    MCSERVE_ASSIGN_OR_RETURN(Tensor u, w.Matrix(u_name, {shape.q_heads * shape.dk, c.hidden_size}));
    m.u_proj_ = std::move(u);
  }
  m.mc_ = mc;
  return m;
}

void MemoryStage::AddStateSpecs(std::vector<StateSpec>* specs) const {
  if (!mc_) return;
  if (mc_->segmentation == McSegmentation::kLogarithmic) {
    specs->push_back({"mc_level_pool", {shape_.state_heads, kLevels, shape_.dk}});
    if (mc_->init_mode == McInitMode::kIndependent) {  // a copy of the rule's state per level
      kernels::Shape memory = PageShape();
      memory.insert(memory.begin(), kLevels);
      specs->push_back({"mc_level_memory", memory});
      for (const StateSpec& s : RuleStates()) {
        kernels::Shape level = s.per_slot;
        level.insert(level.begin(), kLevels);
        specs->push_back({"mc_level_" + s.name, level});
      }
    }
    return;
  }
  specs->push_back({"mc_pool_sum", {shape_.state_heads, shape_.dk}});
  if (SumsCheckpoints()) specs->push_back({"mc_sum", PageShape()});
}

kernels::Shape MemoryStage::PageShape() const {
  if (shape_.mlp_params > 0) return {shape_.state_heads, shape_.mlp_params};
  return {shape_.state_heads, shape_.dk, shape_.dv};
}

bool MemoryStage::SumsCheckpoints() const {
  if (!mc_ || mc_->segmentation != McSegmentation::kConstant) return false;
  if (mc_->aggregation == McAggregation::kMean) return true;
  return mc_->aggregation == McAggregation::kResidual && shape_.mlp_params == 0;
}

absl::Status MemoryStage::Run(const Context& ctx, const Tensor& x, kernels::LinearMemoryArgs memory,
                              const MixerBatch& batch, LayerState& state, Tensor* o) const {
  if (mc_) return Run(ctx, x, LinearRule(memory, aux_.name), *memory.q, *memory.k, batch, state, o);
  memory.layout = batch.layout;
  memory.state = &state.at("memory");
  memory.aux = aux_.name.empty() ? nullptr : &state.at(aux_.name);
  memory.out = o;
  return kernels::LinearMemory(ctx, memory);
}

absl::Status MemoryStage::Run(const Context& ctx, const Tensor& x, const MemoryRule& rule, const Tensor& q,
                              const Tensor& k, const MixerBatch& batch, LayerState& state, Tensor* o) const {
  if (mc_ && mc_->segmentation == McSegmentation::kLogarithmic) return RunLogarithmic(ctx, x, rule, q, k, batch, state, o);
  if (mc_) return RunCached(ctx, x, rule, q, k, batch, state, o);
  return rule.Run(ctx, RowRange(0, x.dim(0)), batch.layout, batch.positions, state, o);
}

absl::StatusOr<std::pair<Tensor, Tensor>> MemoryStage::QueryAndGate(const Context& ctx, const Tensor& x,
                                                                     const Tensor& q) const {
  MCSERVE_ASSIGN_OR_RETURN(Tensor q_state, ExpandHeads(ctx, q, shape_.state_heads));
  if (!u_proj_) return std::make_pair(q_state, q_state);
  MCSERVE_ASSIGN_OR_RETURN(Tensor projected, Project(ctx, x, *u_proj_));
  MCSERVE_ASSIGN_OR_RETURN(Tensor heads, projected.Reshape({x.dim(0), shape_.q_heads, shape_.dk}));
  MCSERVE_ASSIGN_OR_RETURN(Tensor u, ExpandHeads(ctx, heads, shape_.state_heads));
  return std::make_pair(q_state, u);
}

absl::Status MemoryStage::RunCached(const Context& ctx, const Tensor& x, const MemoryRule& rule, const Tensor& q_in,
                                    const Tensor& k, const MixerBatch& batch, LayerState& state, Tensor* o) const {
  const int64_t c = mc_->segment_size, hs = shape_.state_heads;
  const int num_seqs = static_cast<int>(batch.slots.size());
  MCSERVE_ASSIGN_OR_RETURN(auto qu, QueryAndGate(ctx, x, q_in));
  const auto& [q, u] = qu;
  // Pool of the open segment after every row.
  std::vector<int32_t> first_local(num_seqs);
  for (int b = 0; b < num_seqs; ++b) first_local[b] = static_cast<int32_t>(LocalIndex(batch.positions[b] + 1, c));
  MCSERVE_ASSIGN_OR_RETURN(Tensor first_t, Tensor::FromHostI32(first_local, {num_seqs}, ctx.device));
  MCSERVE_ASSIGN_OR_RETURN(Tensor pools, NewF32(ctx, {x.dim(0), hs, shape_.dk}));
  MCSERVE_RETURN_IF_ERROR(kernels::McSegmentPool(
      ctx, {.k = &k, .layout = batch.layout, .first_local = &first_t, .segment_size = c,
            .mean = mc_->pool == McPool::kMean, .pool_sum = &state.at("mc_pool_sum"), .out = &pools}));
  // Split every sequence after each row that closes a segment, and after every row that reads a
  // cached segment when the read-out needs the online memory as each row leaves it.
  const bool row_by_row = rule.ReadsOnlineWeights(mc_->aggregation);
  std::vector<std::vector<Piece::Entry>> runs(num_seqs);
  bool crosses_inside = false;
  for (int b = 0; b < num_seqs; ++b) {
    int64_t begin = batch.cu[b];
    for (int64_t r = batch.cu[b]; r < batch.cu[b + 1]; ++r) {
      const int64_t n = batch.positions[b] + (r - batch.cu[b]) + 1;  // the row's token number
      const bool closes = ClosesSegment(n, c);
      if (closes || (row_by_row && n > c) || r + 1 == batch.cu[b + 1]) {
        runs[b].push_back({b, begin, r + 1, closes});
        begin = r + 1;
      }
    }
    crosses_inside |= runs[b].size() > 1;
  }
  if (!crosses_inside) {
    Piece piece{.whole_batch = true};
    for (auto& run : runs) piece.entries.insert(piece.entries.end(), run.begin(), run.end());
    return RunPiece(ctx, piece, batch, rule, q, u, pools, state, o);
  }
  for (auto& run : runs) {
    for (const Piece::Entry& e : run) {
      MCSERVE_RETURN_IF_ERROR(RunPiece(ctx, Piece{.entries = {e}}, batch, rule, q, u, pools, state, o));
    }
  }
  return absl::OkStatus();
}

absl::Status MemoryStage::RunLogarithmic(const Context& ctx, const Tensor& x, const MemoryRule& rule, const Tensor& q_in,
                                         const Tensor& k, const MixerBatch& batch, LayerState& state, Tensor* o) const {
  const int64_t hs = shape_.state_heads;
  const int num_seqs = static_cast<int>(batch.slots.size());
  MCSERVE_ASSIGN_OR_RETURN(auto qu, QueryAndGate(ctx, x, q_in));
  const auto& [q, u] = qu;
  std::vector<int32_t> first(num_seqs);
  for (int b = 0; b < num_seqs; ++b) {
    const int64_t last = batch.positions[b] + batch.cu[b + 1] - batch.cu[b];
    if (last >= (int64_t{1} << kLevels)) {
      return absl::OutOfRangeError(absl::StrCat("layer ", layer_, ": logarithmic Memory Caching supports up to ",
                                                (int64_t{1} << kLevels) - 1, " tokens per sequence"));
    }
    first[b] = static_cast<int32_t>(batch.positions[b] + 1);
  }
  MCSERVE_ASSIGN_OR_RETURN(Tensor first_t, Tensor::FromHostI32(first, {num_seqs}, ctx.device));
  MCSERVE_ASSIGN_OR_RETURN(Tensor pools, NewF32(ctx, {x.dim(0), hs, shape_.dk}));
  MCSERVE_RETURN_IF_ERROR(kernels::McLevelPool(ctx, {.k = &k, .layout = batch.layout, .first_position = &first_t,
                                                     .level_sums = &state.at("mc_level_pool"),
                                                     .mean = mc_->pool == McPool::kMean, .out = &pools}));
  // Every token closes its online block, so tokens run one at a time.
  for (int b = 0; b < num_seqs; ++b) {
    for (int64_t r = batch.cu[b]; r < batch.cu[b + 1]; ++r) {
      const int64_t n = batch.positions[b] + (r - batch.cu[b]) + 1;
      MCSERVE_RETURN_IF_ERROR(RunLogToken(ctx, rule, batch, b, r, n, q, u, pools, state, o));
    }
  }
  return absl::OkStatus();
}

absl::Status MemoryStage::RunLogToken(const Context& ctx, const MemoryRule& rule, const MixerBatch& batch, int seq,
                                      int64_t row, int64_t n, const Tensor& q, const Tensor& u, const Tensor& pools,
                                      LayerState& state, Tensor* o) const {
  const int slot = batch.slots[seq];
  const int p = OnlineLevel(n);
  const bool independent = mc_->init_mode == McInitMode::kIndependent;
  std::optional<Tensor> level_out;
  if (independent) {
    MCSERVE_ASSIGN_OR_RETURN(level_out, UpdateLevels(ctx, rule, slot, row, n, p, state));
  }
  // 1. The running memory (token 1 onwards, never reset) reads into row `row` of o.
  {
    const int32_t cu[2] = {0, 1};
    const int32_t row32 = static_cast<int32_t>(row);
    const int64_t before = n - 1;
    MCSERVE_ASSIGN_OR_RETURN(Tensor cu_t, Tensor::FromHostI32(cu, {2}, ctx.device));
    MCSERVE_ASSIGN_OR_RETURN(Tensor slot_t, Tensor::FromHostI32({&slot, 1}, {1}, ctx.device));
    Tensor out_row = o->Rows(row, row + 1);
    MCSERVE_RETURN_IF_ERROR(rule.Run(ctx, {&row32, 1}, {.cu_seqlens = &cu_t, .slot_ids = &slot_t}, {&before, 1},
                                     state, &out_row));
    // Independent: the online block is its own compressor, unless it starts at token 1.
    if (level_out) MCSERVE_RETURN_IF_ERROR(out_row.CopyFrom(*level_out));
  }
  // 2. Cached blocks: pop those of level < p, then aggregate with the rest.
  CheckpointStore& store = *batch.checkpoints;
  const CheckpointList cps = store.Checkpoints(slot, layer_);
  int pops = 0;
  while (pops < static_cast<int>(cps.size()) && cps[cps.size() - 1 - pops]->segment.level < p) ++pops;
  store.DropNewest(slot, layer_, pops);
  const PieceEntry entry{seq, row, row + 1, true};
  MCSERVE_RETURN_IF_ERROR(Aggregate(ctx, rule, {&entry, 1}, row, row + 1, batch, q, u, pools, state, o));
  // 3. Push the online block [n − 2^p + 1, n].
  Tensor source = state.at("memory").Rows(slot, slot + 1);
  if (level_out) {
    MCSERVE_ASSIGN_OR_RETURN(Tensor levels, LevelView(state, "mc_level_memory"));
    source = levels.Rows(static_cast<int64_t>(slot) * kLevels + p, static_cast<int64_t>(slot) * kLevels + p + 1);
  }
  MCSERVE_ASSIGN_OR_RETURN(Tensor memory_snapshot, source.Reshape(PageShape()));
  MCSERVE_ASSIGN_OR_RETURN(Tensor pooled, pools.Rows(row, row + 1).Reshape({shape_.state_heads, shape_.dk}));
  return store.Freeze(slot, layer_, memory_snapshot, pooled, {n - (int64_t{1} << p) + 1, n, p});
}

absl::StatusOr<std::optional<Tensor>> MemoryStage::UpdateLevels(const Context& ctx, const MemoryRule& rule, int slot,
                                                                int64_t row, int64_t n, int online_level,
                                                                LayerState& state) const {
  // Levels below bitlen(n − 1) have a block other than [1, 2^ℓ]; those of even index are compressed
  // (B.3.2 property 4); the block [1, 2^ℓ] is the running memory itself.
  const int top = n == 1 ? 0 : 64 - __builtin_clzll(static_cast<uint64_t>(n - 1));
  // The per-level copies of the rule's state under its own names, one virtual slot per (slot, level).
  LayerState levels;
  MCSERVE_ASSIGN_OR_RETURN(levels.tensors()["memory"], LevelView(state, "mc_level_memory"));
  for (const StateSpec& s : RuleStates()) {
    MCSERVE_ASSIGN_OR_RETURN(levels.tensors()[s.name], LevelView(state, "mc_level_" + s.name));
  }
  std::vector<int32_t> active, rows, cu = {0};
  std::vector<int64_t> before;  // tokens of each level's block before n
  int online_index = -1;
  for (int l = 0; l < top; ++l) {
    const int64_t block = (n - 1) >> l;
    if (block % 2 != 0) continue;
    const int32_t virtual_slot = slot * kLevels + l;
    const int64_t in_block = (n - 1) & ((int64_t{1} << l) - 1);
    if (in_block == 0) {  // a fresh compressor starts at n
      for (auto& [name, t] : levels.tensors()) MCSERVE_RETURN_IF_ERROR(ZeroSlot(t, virtual_slot));
      MCSERVE_RETURN_IF_ERROR(rule.Restart(ctx, virtual_slot, levels));
    }
    if (l == online_level) online_index = static_cast<int>(active.size());
    active.push_back(virtual_slot);
    rows.push_back(static_cast<int32_t>(row));
    before.push_back(in_block);
    cu.push_back(static_cast<int32_t>(rows.size()));
  }
  if (active.empty()) return std::optional<Tensor>();
  const int64_t m = static_cast<int64_t>(active.size());
  MCSERVE_ASSIGN_OR_RETURN(Tensor cu_t, Tensor::FromHostI32(cu, {m + 1}, ctx.device));
  MCSERVE_ASSIGN_OR_RETURN(Tensor slots_t, Tensor::FromHostI32(active, {m}, ctx.device));
  MCSERVE_ASSIGN_OR_RETURN(Tensor out, NewF32(ctx, {m, shape_.state_heads, shape_.dv}));
  MCSERVE_RETURN_IF_ERROR(
      rule.Run(ctx, rows, {.cu_seqlens = &cu_t, .slot_ids = &slots_t}, before, levels, &out));
  if (online_index < 0) return std::optional<Tensor>();
  return std::optional<Tensor>(out.Rows(online_index, online_index + 1));
}

std::vector<StateSpec> MemoryStage::RuleStates() const {
  std::vector<StateSpec> states = shape_.rule_states;
  if (!aux_.name.empty()) states.push_back({aux_.name, aux_.per_slot});
  return states;
}

absl::StatusOr<Tensor> MemoryStage::LevelView(LayerState& state, const std::string& name) const {
  Tensor& t = state.at(name);  // [slots, L, ...]
  kernels::Shape shape(t.shape().begin() + 1, t.shape().end());
  shape[0] = t.dim(0) * kLevels;
  return t.Reshape(shape);
}

absl::Status MemoryStage::RunPiece(const Context& ctx, const Piece& piece, const MixerBatch& batch,
                                   const MemoryRule& rule, const Tensor& q, const Tensor& u, const Tensor& pools,
                                   LayerState& state, Tensor* o) const {
  CheckpointStore& store = *batch.checkpoints;
  const int64_t begin = piece.whole_batch ? 0 : piece.entries[0].begin;
  const int64_t end = piece.whole_batch ? o->dim(0) : piece.entries[0].end;
  Tensor out_rows = o->Rows(begin, end);
  // 1. The online memory over the piece's rows.
  Tensor cu_t, slot_t;
  kernels::BatchLayout layout = batch.layout;
  std::vector<int64_t> first_positions = batch.positions;
  if (!piece.whole_batch) {
    const PieceEntry& e = piece.entries[0];
    const int32_t cu[2] = {0, static_cast<int32_t>(end - begin)};
    const int32_t slot = batch.slots[e.seq];
    MCSERVE_ASSIGN_OR_RETURN(cu_t, Tensor::FromHostI32(cu, {2}, ctx.device));
    MCSERVE_ASSIGN_OR_RETURN(slot_t, Tensor::FromHostI32({&slot, 1}, {1}, ctx.device));
    layout = {.cu_seqlens = &cu_t, .slot_ids = &slot_t};
    first_positions = {batch.positions[e.seq] + (e.begin - batch.cu[e.seq])};
  }
  MCSERVE_RETURN_IF_ERROR(rule.Run(ctx, RowRange(begin, end), layout, first_positions, state, &out_rows));

  // 2. Aggregate with the closed segments. The mean's weights differ per sequence, so it reads one
  // sequence at a time; the other aggregations read the whole piece at once.
  if (mc_->aggregation == McAggregation::kMean) {
    for (const Piece::Entry& e : piece.entries) {
      MCSERVE_RETURN_IF_ERROR(Aggregate(ctx, rule, {&e, 1}, e.begin, e.end, batch, q, u, pools, state, o));
    }
  } else {
    MCSERVE_RETURN_IF_ERROR(Aggregate(ctx, rule, piece.entries, begin, end, batch, q, u, pools, state, o));
  }

  // 3. Freeze the segments whose last token this piece computed.
  for (const Piece::Entry& e : piece.entries) {
    if (!e.closes) continue;
    const int64_t last_token = batch.positions[e.seq] + (e.end - batch.cu[e.seq]);
    MCSERVE_RETURN_IF_ERROR(
        CloseSegment(ctx, rule, batch.slots[e.seq], last_token, e.end - 1, pools, store, state));
  }
  return absl::OkStatus();
}

absl::Status MemoryStage::Aggregate(const Context& ctx, const MemoryRule& rule, std::span<const PieceEntry> entries,
                                    int64_t begin, int64_t end, const MixerBatch& batch, const Tensor& q,
                                    const Tensor& u, const Tensor& pools, LayerState& state, Tensor* o) const {
  const bool summed = SumsCheckpoints();
  CheckpointStore& store = *batch.checkpoints;
  if (mc_->aggregation == McAggregation::kSsc) {
    for (const PieceEntry& e : entries) {
      if (!store.AllOnDevice(batch.slots[e.seq], layer_)) {
        return AggregateRouted(ctx, rule, entries, begin, end, batch, q, u, pools, state, o);
      }
    }
  }
  std::vector<Tensor> sums;  // the slots' running sums (summed aggregations), stable below
  sums.reserve(entries.size());
  std::vector<McPageRef> pages;
  std::vector<int32_t> offsets = {0}, token_pages;
  size_t cached = 0;  // checkpoints of the (last) entry's slot
  for (const Piece::Entry& e : entries) {
    const int slot = batch.slots[e.seq];
    const CheckpointList cps = store.Checkpoints(slot, layer_);
    // Summed aggregations keep only the running sum; the closed-segment count follows from the position.
    cached = summed ? static_cast<size_t>(CachedSegments(batch.positions[e.seq] + (e.begin - batch.cu[e.seq]) + 1,
                                                         mc_->segment_size))
                    : cps.size();
    std::vector<int32_t> ids;
    if (summed && cached > 0) {
      MCSERVE_ASSIGN_OR_RETURN(Tensor sum, state.at("mc_sum").Rows(slot, slot + 1).Reshape(PageShape()));
      sums.push_back(std::move(sum));
      ids.push_back(static_cast<int32_t>(pages.size()));
      pages.push_back({.memory = &sums.back()});
    } else if (!summed) {
      std::vector<int32_t> all(cps.size());
      for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int32_t>(i);
      MCSERVE_ASSIGN_OR_RETURN(std::vector<const Tensor*> memories, store.Stage(slot, layer_, all));
      for (size_t i = 0; i < cps.size(); ++i) {
        ids.push_back(static_cast<int32_t>(pages.size()));
        pages.push_back({.memory = memories[i], .pooled_key = &cps[i]->pooled_key});
      }
    }
    for (int64_t r = e.begin; r < e.end; ++r) {
      token_pages.insert(token_pages.end(), ids.begin(), ids.end());
      offsets.push_back(static_cast<int32_t>(token_pages.size()));
    }
  }
  return Readout(ctx, rule, entries, begin, end, batch, pages, offsets, token_pages, cached, q, u, pools, state, o);
}

absl::Status MemoryStage::Readout(const Context& ctx, const MemoryRule& rule, std::span<const PieceEntry> entries,
                                  int64_t begin, int64_t end, const MixerBatch& batch,
                                  std::span<const McPageRef> pages, std::span<const int32_t> offsets,
                                  std::span<const int32_t> token_pages, size_t cached, const Tensor& q,
                                  const Tensor& u, const Tensor& pools, LayerState& state, Tensor* o) const {
  MCSERVE_ASSIGN_OR_RETURN(Tensor offsets_t,
                           Tensor::FromHostI32(offsets, {static_cast<int64_t>(offsets.size())}, ctx.device));
  MCSERVE_ASSIGN_OR_RETURN(Tensor pages_t,
                           Tensor::FromHostI32(token_pages, {static_cast<int64_t>(token_pages.size())}, ctx.device));
  // The rows as sequences in slots (entries cover [begin, end) in order).
  std::vector<int32_t> cu = {0}, slots;
  for (const PieceEntry& e : entries) {
    cu.push_back(static_cast<int32_t>(e.end - begin));
    slots.push_back(batch.slots[e.seq]);
  }
  MCSERVE_ASSIGN_OR_RETURN(Tensor cu_t, Tensor::FromHostI32(cu, {static_cast<int64_t>(cu.size())}, ctx.device));
  MCSERVE_ASSIGN_OR_RETURN(Tensor slots_t,
                           Tensor::FromHostI32(slots, {static_cast<int64_t>(slots.size())}, ctx.device));
  Tensor q_rows = q.Rows(begin, end), u_rows = u.Rows(begin, end), pool_rows = pools.Rows(begin, end);
  Tensor out_rows = o->Rows(begin, end);
  return rule.Read(ctx, {.mc = &*mc_, .cached = cached, .q = &q_rows, .u = &u_rows, .pools = &pool_rows,
                         .pages = pages, .offsets = &offsets_t, .token_pages = &pages_t,
                         .layout = {.cu_seqlens = &cu_t, .slot_ids = &slots_t}, .state = &state,
                         .out = &out_rows});
}

absl::Status MemoryStage::CloseSegment(const Context& ctx, const MemoryRule& rule, int slot, int64_t last_token,
                                       int64_t row, const Tensor& pools, CheckpointStore& store,
                                       LayerState& state) const {
  MCSERVE_ASSIGN_OR_RETURN(Tensor memory, state.at("memory").Rows(slot, slot + 1).Reshape(PageShape()));
  MCSERVE_ASSIGN_OR_RETURN(Tensor pooled, pools.Rows(row, row + 1).Reshape({shape_.state_heads, shape_.dk}));
  const Segment segment{last_token - mc_->segment_size + 1, last_token, 0};
  if (SumsCheckpoints()) {
    // Read only through the running sum: O(1) state per request (B.8).
    Tensor sum = state.at("mc_sum").Rows(slot, slot + 1);
    MCSERVE_ASSIGN_OR_RETURN(Tensor flat, memory.Reshape(sum.shape()));
    MCSERVE_RETURN_IF_ERROR(kernels::Add(ctx, {.a = &sum, .b = &flat, .out = &sum}));
  } else {
    MCSERVE_RETURN_IF_ERROR(store.Freeze(slot, layer_, memory, pooled, segment));
  }
  if (mc_->init_mode == McInitMode::kIndependent) MCSERVE_RETURN_IF_ERROR(rule.Restart(ctx, slot, state));
  if (!aux_.name.empty() && aux_.reset_at_segment_start) MCSERVE_RETURN_IF_ERROR(ZeroSlot(state.at(aux_.name), slot));
  return absl::OkStatus();
}

}  // namespace mcserve::engine
