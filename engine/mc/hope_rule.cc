// HopeRule: MemoryStage's view of HOPE's M_mem (hope_rule.h).
#include "engine/mc/hope_rule.h"

#include <vector>

#include "base/status_macros.h"
#include "engine/mc/deep_rule.h"
#include "engine/runner/mixer_ops.h"
#include "kernels/deep_memory/deep_mc_readout.h"
#include "kernels/hope_memory/hope_mem_write.h"

namespace mcserve::engine {

using kernels::Context;
using kernels::Tensor;

namespace {

bool HasMomentum(const kernels::HopeMemoryOptions& o) { return o.momentum != kernels::HopeMomentum::kNone; }

}  // namespace

std::vector<StateSpec> HopeRule::MemStates(const kernels::HopeMemoryOptions& o, int64_t heads) {
  const int64_t pm = kernels::HopeMemParams(o);
  std::vector<StateSpec> specs = {{"mem_anchor", {heads, pm}}};
  if (HasMomentum(o)) specs.push_back({"momentum", {heads, pm}});
  return specs;
}

std::vector<StateSpec> HopeRule::StateSpecs(const HopeMemoryWeights& w, int64_t heads) {
  const kernels::HopeMemoryOptions& o = w.options;
  const int64_t pm = kernels::HopeMemParams(o), pf = kernels::HopeFastParams(o);
  std::vector<StateSpec> specs = {{"memory", {heads, pm}}};
  for (const StateSpec& s : MemStates(o, heads)) specs.push_back(s);
  specs.push_back({"fast", {heads, pf}});
  specs.push_back({"fast_anchor", {heads, pf}});
  if (HasMomentum(o)) specs.push_back({"fast_momentum", {heads, pf}});
  if (o.conv_size > 1) {
    for (const char* name : {"conv_q", "conv_k", "conv_v"}) {
      specs.push_back({name, {o.conv_size - 1, heads * o.head_dim}});
    }
  }
  if (w.soup) specs.push_back({"mem_read", {heads, pm}});
  return specs;
}

absl::Status HopeRule::Run(const Context& ctx, std::span<const int32_t> rows, const kernels::BatchLayout& layout,
                           std::span<const int64_t> first_positions, LayerState& state, Tensor* out) const {
  // The anchor refresh counts from the request's first token, also for a memory restarted mid-request
  // (decision 2). With one row per sequence (decode, row-by-row pieces, logarithmic MC's per-level
  // compressors, whose first_positions count from their block) the row's own position says it; a
  // multi-row sequence comes from a constant-segment piece or a whole batch, whose first_positions
  // count from the request's start.
  const bool one_row_each = rows.size() == first_positions.size();
  thread_local std::vector<int32_t> phase;  // capacity kept: a decode step allocates nothing
  phase.resize(first_positions.size());
  for (size_t i = 0; i < phase.size(); ++i) {
    const int64_t pos = one_row_each ? in_.row_positions[rows[i]] : first_positions[i];
    phase[i] = static_cast<int32_t>(pos % w_.phase_period);
  }
  MCSERVE_ASSIGN_OR_RETURN(Tensor phase_t, Tensor::FromHostI32(phase, {static_cast<int64_t>(phase.size())}, ctx.device));
  kernels::HopeMemWriteArgs a{.options = w_.options, .q = in_.q, .k = in_.k, .v = in_.v, .alpha = in_.alpha,
                              .eta = in_.eta, .beta = in_.beta};
  kernels::TensorList keep;  // the selected rows of this pass's features
  MCSERVE_RETURN_IF_ERROR(SelectRowsOf(ctx, rows, {&a.q, &a.k, &a.v, &a.alpha, &a.eta, &a.beta}, keep));
  a.phase = &phase_t;
  a.layout = layout;
  a.memory = &state.at("memory");
  a.mem_anchor = &state.at("mem_anchor");
  a.momentum = HasMomentum(w_.options) ? &state.at("momentum") : nullptr;
  a.read_weights = w_.soup && state.tensors().contains("mem_read") ? &state.at("mem_read") : nullptr;
  a.out = out;
  return kernels::HopeMemWrite(ctx, a);
}

absl::Status HopeRule::Read(const Context& ctx, const McRead& r) const {
  // Soup mixes the weights each row's online read-out read ("mem_read"); rows without pages keep o_on.
  return ReadDeepPages(ctx, r,
                       {.activation = w_.options.activation == kernels::HopeActivation::kSilu
                                          ? kernels::DeepMcActivation::kSilu
                                          : kernels::DeepMcActivation::kGelu,
                        .expansion = w_.options.expansion,
                        .soup_weights = "mem_read",
                        .soup_keeps_online = true});
}

absl::Status HopeRule::Restart(const Context& /*ctx*/, int slot, LayerState& state) const {
  return RestartMem(w_, slot, state);
}

absl::Status HopeRule::RestartMem(const HopeMemoryWeights& w, int slot, LayerState& state) {
  for (const char* name : {"memory", "mem_anchor"}) {
    Tensor row = state.at(name).Rows(slot, slot + 1);
    MCSERVE_RETURN_IF_ERROR(row.CopyFrom(w.initial_memory));
  }
  if (HasMomentum(w.options)) MCSERVE_RETURN_IF_ERROR(ZeroSlot(state.at("momentum"), slot));
  return absl::OkStatus();
}

absl::Status HopeRule::RestartFast(const HopeMemoryWeights& w, int slot, LayerState& state) {
  Tensor fast = state.at("fast").Rows(slot, slot + 1);
  MCSERVE_RETURN_IF_ERROR(fast.CopyFrom(w.initial_fast));
  if (HasMomentum(w.options)) MCSERVE_RETURN_IF_ERROR(ZeroSlot(state.at("fast_momentum"), slot));
  return absl::OkStatus();
}

}  // namespace mcserve::engine
