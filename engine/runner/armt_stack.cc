#include "engine/runner/armt_stack.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/runner/mixer_ops.h"
#include "engine/runner/model.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/gather_rows/gather_rows.h"

namespace mcserve::engine {

using kernels::Context;
using kernels::Tensor;

namespace {

constexpr const char* kPrefix = "memory_cell.model.transformer.";

// wrap_pos from the config, or (null) from the wpe row count (n_positions + M: wrap).
absl::StatusOr<bool> WrapPos(const ArmtConfig& a, const WeightBinder& w) {
  if (a.wrap_pos) return *a.wrap_pos;
  MCSERVE_ASSIGN_OR_RETURN(kernels::Shape shape, w.StoredShape(absl::StrCat(kPrefix, "wpe.weight")));
  return !shape.empty() && shape[0] == a.n_positions + a.num_mem_tokens;
}

// `alias` equals `canonical` in shape and value.
absl::Status CheckEqual(const WeightStore& store, const std::string& alias, const std::string& canonical) {
  const absl::Status differ = absl::InvalidArgumentError(
      absl::StrCat("armt: ", alias, " must equal ", canonical, " (tied / aliased) in ", store.FileOf(alias)));
  if (!store.Has(canonical)) return differ;
  MCSERVE_ASSIGN_OR_RETURN(Tensor a, store.Get(alias));
  MCSERVE_ASSIGN_OR_RETURN(Tensor c, store.Get(canonical));
  if (a.shape() != c.shape()) return differ;
  MCSERVE_ASSIGN_OR_RETURN(std::vector<float> av, a.ToHostF32());
  MCSERVE_ASSIGN_OR_RETURN(std::vector<float> cv, c.ToHostF32());
  return av == cv ? absl::OkStatus() : differ;
}

}  // namespace

absl::Status CheckArmtAliases(const WeightStore& store) {
  constexpr std::string_view kLayers = "memory_cell.layers.";
  for (const std::string& name : store.Names()) {
    if (name == "memory_cell.model.lm_head.weight") {
      MCSERVE_RETURN_IF_ERROR(CheckEqual(store, name, absl::StrCat(kPrefix, "wte.weight")));
    } else if (name.starts_with(kLayers)) {
      MCSERVE_RETURN_IF_ERROR(CheckEqual(store, name, absl::StrCat(kPrefix, "h.", name.substr(kLayers.size()))));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ArmtStack> ArmtStack::Bind(const ModelConfig& c, const WeightBinder& w) {
  const ArmtConfig& a = c.armt;
  ArmtStack s;
  s.segment_ = a.segment_size;
  s.mem_ = a.num_mem_tokens;
  s.n_positions_ = a.n_positions;
  s.vocab_ = c.vocab_size;
  s.d_ = c.hidden_size;
  MCSERVE_ASSIGN_OR_RETURN(s.wrap_pos_, WrapPos(a, w));
  const std::string p = kPrefix;
  MCSERVE_ASSIGN_OR_RETURN(Tensor wte, w.Float(p + "wte.weight", {c.vocab_size, c.hidden_size}));
  MCSERVE_ASSIGN_OR_RETURN(Tensor memory, w.Float("memory_cell.memory", {s.mem_, c.hidden_size}));
  MCSERVE_ASSIGN_OR_RETURN(std::vector<float> table, wte.ToHostF32());
  MCSERVE_ASSIGN_OR_RETURN(std::vector<float> mem_rows, memory.ToHostF32());
  table.insert(table.end(), mem_rows.begin(), mem_rows.end());
  MCSERVE_ASSIGN_OR_RETURN(s.inputs_, Tensor::FromHost(table, {c.vocab_size + s.mem_, c.hidden_size}, w.device()));
  s.wte_ = s.inputs_.Rows(0, c.vocab_size);
  const int64_t rows = a.n_positions + (s.wrap_pos_ ? s.mem_ : 0);
  MCSERVE_ASSIGN_OR_RETURN(s.wpe_, w.Matrix(p + "wpe.weight", {rows, c.hidden_size}));
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    MCSERVE_ASSIGN_OR_RETURN(s.layers_.emplace_back(), ArmtLayer::Bind(c, w, l));
  }
  return s;
}

std::vector<std::vector<StateSpec>> ArmtStack::StateSpecs() const {
  std::vector<std::vector<StateSpec>> specs;
  for (const ArmtLayer& l : layers_) specs.push_back(l.StateSpecs());
  return specs;
}

int64_t ArmtStack::OpenLength(const StatePool& pool, int slot) const {
  return pool.position(slot) - segment_ * pool.closed_segments(slot);
}

int64_t ArmtStack::TokensLeft(const StatePool& pool, int slot) const { return segment_ - OpenLength(pool, slot); }

absl::Status ArmtStack::CheckChunks(std::span<const SequenceChunk> chunks, const StatePool& pool) const {
  for (const SequenceChunk& ch : chunks) {
    const int64_t c = OpenLength(pool, ch.slot), n = static_cast<int64_t>(ch.tokens.size());
    if (ch.close_segment && (n != 0 || c != segment_)) {
      return absl::InvalidArgumentError(absl::StrCat("armt: a close chunk has no tokens and closes a full segment; slot ",
                                                     ch.slot, " has ", c, " of ", segment_, " content tokens and ",
                                                     n, " tokens in the chunk"));
    }
    if (!ch.close_segment && c + n > segment_) {
      return absl::InvalidArgumentError(absl::StrCat("armt: slot ", ch.slot, "'s open segment holds ", c, " of ",
                                                     segment_, " content tokens; a chunk of ", n,
                                                     " does not fit (close the segment first)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> ArmtStack::Inputs(const Context& ctx, const Tensor& ids, const Tensor& positions) const {
  const int64_t t = ids.dim(0);
  MCSERVE_ASSIGN_OR_RETURN(Tensor h, NewF32(ctx, {t, d_}));    // [T, D]
  MCSERVE_ASSIGN_OR_RETURN(Tensor pos, NewF32(ctx, {t, d_}));  // [T, D] position rows
  MCSERVE_RETURN_IF_ERROR(kernels::GatherRows(ctx, {.table = &inputs_, .ids = &ids, .out = &h}));
  MCSERVE_RETURN_IF_ERROR(kernels::GatherRows(ctx, {.table = &wpe_, .ids = &positions, .out = &pos}));
  MCSERVE_RETURN_IF_ERROR(kernels::Add(ctx, {.a = &h, .b = &pos, .out = &h}));
  return h;
}

ArmtHostRows ArmtStack::Plan(std::span<const SequenceChunk> chunks, const StatePool& pool) const {
  ArmtHostRows r;
  for (const SequenceChunk& ch : chunks) {
    const int32_t c = static_cast<int32_t>(OpenLength(pool, ch.slot));
    if (ch.close_segment) {
      r.close_slots.push_back(ch.slot);
      r.close_first.push_back(pool.closed_segments(ch.slot) == 0 ? 1 : 0);
      for (int32_t j = 0; j < mem_; ++j) {
        r.close_rows.push_back(static_cast<int32_t>(r.ids.size()));
        r.ids.push_back(static_cast<int32_t>(vocab_ + j));
        r.positions.push_back(static_cast<int32_t>(wrap_pos_ ? n_positions_ + j : c + j));
      }
      r.close_cu.push_back(static_cast<int32_t>(r.close_rows.size()));
    } else {
      for (size_t j = 0; j < ch.tokens.size(); ++j) {
        r.ids.push_back(ch.tokens[j]);
        r.positions.push_back(c + static_cast<int32_t>(j));
      }
    }
    r.cu.push_back(static_cast<int32_t>(r.ids.size()));
    r.slots.push_back(ch.slot);
    r.cached.push_back(c);
  }
  return r;
}

absl::StatusOr<Tensor> ArmtStack::Forward(const Context& ctx, std::span<const SequenceChunk> chunks,
                                          StatePool& pool) const {
  const ArmtHostRows r = Plan(chunks, pool);
  const kernels::Device dev = ctx.device;
  const int64_t nc = r.close_slots.size();
  auto i32 = [&](const std::vector<int32_t>& v) { return Tensor::FromHostI32(v, {static_cast<int64_t>(v.size())}, dev); };
  MCSERVE_ASSIGN_OR_RETURN(Tensor ids, i32(r.ids));
  MCSERVE_ASSIGN_OR_RETURN(Tensor positions, i32(r.positions));
  MCSERVE_ASSIGN_OR_RETURN(Tensor cu, i32(r.cu));
  MCSERVE_ASSIGN_OR_RETURN(Tensor slots, i32(r.slots));
  MCSERVE_ASSIGN_OR_RETURN(Tensor cached, i32(r.cached));
  MCSERVE_ASSIGN_OR_RETURN(Tensor close_rows, i32(r.close_rows));
  MCSERVE_ASSIGN_OR_RETURN(Tensor close_cu, i32(r.close_cu));
  MCSERVE_ASSIGN_OR_RETURN(Tensor close_slots, i32(r.close_slots));
  MCSERVE_ASSIGN_OR_RETURN(Tensor close_first, i32(r.close_first));
  const ArmtRows rows{.layout = {.cu_seqlens = &cu, .slot_ids = &slots}, .cached = &cached,
                      .close_rows = &close_rows, .close_layout = {.cu_seqlens = &close_cu, .slot_ids = &close_slots},
                      .close_first = &close_first, .any_close = nc > 0};
  MCSERVE_ASSIGN_OR_RETURN(Tensor h, Inputs(ctx, ids, positions));  // [T, D] residual stream
  for (size_t l = 0; l < layers_.size(); ++l) {
    MCSERVE_RETURN_IF_ERROR(layers_[l].Run(ctx, rows, pool.layer(static_cast<int>(l)), h));
  }
  for (const SequenceChunk& ch : chunks) {
    if (ch.close_segment) {
      pool.CloseSegment(ch.slot);
    } else {
      pool.Advance(ch.slot, static_cast<int64_t>(ch.tokens.size()));
    }
  }
  return h;
}

}  // namespace mcserve::engine
