// Logarithmic segmentation (Log-Linear++, B.3.2; memory_stage.h): every token closes its online
// block, so tokens run one at a time — the running memory reads, the cached blocks of lower level
// are popped, the rest aggregated, and the online block pushed. In independent init mode each
// dyadic block is compressed by its own per-level copy of the rule's state (B.5.5).
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/mc/mc_pass.h"
#include "engine/mc/segmentation.h"
#include "engine/runner/mixer_ops.h"
#include "kernels/mc_pool/mc_pool.h"

namespace mcserve::engine {

using kernels::Tensor;

absl::Status MemoryStage::RunLogarithmic(McPass& pass) const {
  const MixerBatch& batch = pass.batch;
  const int num_seqs = static_cast<int>(batch.slots.size());
  std::vector<int32_t> first(num_seqs);
  for (int b = 0; b < num_seqs; ++b) {
    const int64_t last = batch.positions[b] + batch.cu[b + 1] - batch.cu[b];
    if (last >= (int64_t{1} << kLevels)) {
      return absl::OutOfRangeError(absl::StrCat("layer ", layer_, ": logarithmic Memory Caching supports up to ",
                                                (int64_t{1} << kLevels) - 1, " tokens per sequence"));
    }
    first[b] = static_cast<int32_t>(batch.positions[b] + 1);
  }
  MCSERVE_ASSIGN_OR_RETURN(Tensor first_t, Tensor::FromHostI32(first, {num_seqs}, pass.ctx.device));
  MCSERVE_ASSIGN_OR_RETURN(pass.pools, NewF32(pass.ctx, {pass.out->dim(0), shape_.state_heads, shape_.dk}));
  MCSERVE_RETURN_IF_ERROR(kernels::McLevelPool(pass.ctx, {.k = &pass.rule.keys(), .layout = batch.layout,
                                                          .first_position = &first_t,
                                                          .level_sums = &pass.state.at("mc_level_pool"),
                                                          .mean = mc_->pool == McPool::kMean, .out = &pass.pools}));
  for (int b = 0; b < num_seqs; ++b) {
    for (int64_t r = batch.cu[b]; r < batch.cu[b + 1]; ++r) {
      const int64_t n = batch.positions[b] + (r - batch.cu[b]) + 1;
      MCSERVE_RETURN_IF_ERROR(RunLogToken(pass, b, r, n));
    }
  }
  return absl::OkStatus();
}

absl::Status MemoryStage::RunLogToken(const McPass& pass, int seq, int64_t row, int64_t n) const {
  const int slot = pass.batch.slots[seq];
  const int p = OnlineLevel(n);
  std::optional<Tensor> level_out;
  if (mc_->init_mode == McInitMode::kIndependent) {
    MCSERVE_ASSIGN_OR_RETURN(level_out, UpdateLevels(pass, slot, row, n, p));
  }
  // The token as a sequence of one row (n − 1 tokens before it), read and aggregated alike.
  MCSERVE_ASSIGN_OR_RETURN(SubBatch token, SubBatch::Of(pass.ctx, pass.batch, {{seq, row, row + 1, true}}));
  // 1. The running memory (token 1 onwards, never reset) reads into row `row` of out.
  {
    const int32_t row32 = static_cast<int32_t>(row);
    Tensor out_row = pass.out->Rows(row, row + 1);
    MCSERVE_RETURN_IF_ERROR(
        pass.rule.Run(pass.ctx, {&row32, 1}, token.layout(), token.first_positions(), pass.state, &out_row));
    // Independent: the online block is its own compressor, unless it starts at token 1.
    if (level_out) MCSERVE_RETURN_IF_ERROR(out_row.CopyFrom(*level_out));
  }
  // 2. Cached blocks: pop those of level < p, then aggregate with the rest.
  CheckpointStore& store = *pass.batch.checkpoints;
  const CheckpointList cps = store.Checkpoints(slot, layer_);
  int pops = 0;
  while (pops < static_cast<int>(cps.size()) && cps[cps.size() - 1 - pops]->segment.level < p) ++pops;
  store.DropNewest(slot, layer_, pops);
  MCSERVE_RETURN_IF_ERROR(Aggregate(pass, token));
  // 3. Push the online block [n − 2^p + 1, n].
  Tensor source = pass.state.at("memory").Rows(slot, slot + 1);
  if (level_out) {
    MCSERVE_ASSIGN_OR_RETURN(Tensor levels, LevelView(pass.state, "mc_level_memory"));
    source = levels.Rows(static_cast<int64_t>(slot) * kLevels + p, static_cast<int64_t>(slot) * kLevels + p + 1);
  }
  MCSERVE_ASSIGN_OR_RETURN(Tensor memory_snapshot, source.Reshape(PageShape()));
  MCSERVE_ASSIGN_OR_RETURN(Tensor pooled, pass.pools.Rows(row, row + 1).Reshape({shape_.state_heads, shape_.dk}));
  return store.Freeze(slot, layer_, memory_snapshot, pooled, {n - (int64_t{1} << p) + 1, n, p});
}

absl::StatusOr<std::optional<Tensor>> MemoryStage::UpdateLevels(const McPass& pass, int slot, int64_t row, int64_t n,
                                                                int online_level) const {
  // Levels below bitlen(n − 1) have a block other than [1, 2^ℓ]; those of even index are compressed
  // (B.3.2 property 4); the block [1, 2^ℓ] is the running memory itself.
  const int top = n == 1 ? 0 : 64 - __builtin_clzll(static_cast<uint64_t>(n - 1));
  // The per-level copies of the rule's state under its own names, one virtual slot per (slot, level).
  LayerState levels;
  MCSERVE_ASSIGN_OR_RETURN(levels.tensors()["memory"], LevelView(pass.state, "mc_level_memory"));
  for (const StateSpec& s : RuleStates()) {
    MCSERVE_ASSIGN_OR_RETURN(levels.tensors()[s.name], LevelView(pass.state, "mc_level_" + s.name));
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
      MCSERVE_RETURN_IF_ERROR(pass.rule.Restart(pass.ctx, virtual_slot, levels));
    }
    if (l == online_level) online_index = static_cast<int>(active.size());
    active.push_back(virtual_slot);
    rows.push_back(static_cast<int32_t>(row));
    before.push_back(in_block);
    cu.push_back(static_cast<int32_t>(rows.size()));
  }
  if (active.empty()) return std::optional<Tensor>();
  const int64_t m = static_cast<int64_t>(active.size());
  MCSERVE_ASSIGN_OR_RETURN(DeviceLayout layout, DeviceLayout::Upload(pass.ctx, cu, active));
  MCSERVE_ASSIGN_OR_RETURN(Tensor out, NewF32(pass.ctx, {m, shape_.state_heads, shape_.dv}));
  MCSERVE_RETURN_IF_ERROR(pass.rule.Run(pass.ctx, rows, layout.view(), before, levels, &out));
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

}  // namespace mcserve::engine
