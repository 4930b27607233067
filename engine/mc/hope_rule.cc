// HopeRule: MemoryStage's view of HOPE's self-modifying Titans memories (hope_rule.h).
#include "engine/mc/hope_rule.h"

#include <vector>

#include "base/status_macros.h"

namespace mcserve::engine {

using kernels::Context;
using kernels::Tensor;

namespace {

bool HasMomentum(const kernels::HopeMemoryOptions& o) { return o.momentum != kernels::HopeMomentum::kNone; }

}  // namespace

std::vector<StateSpec> HopeRule::StateSpecs(const kernels::HopeMemoryOptions& o, int64_t heads) {
  const int64_t pm = kernels::HopeMemParams(o), pf = kernels::HopeFastParams(o);
  std::vector<StateSpec> specs = {{"memory", {heads, pm}},
                                  {"mem_anchor", {heads, pm}},
                                  {"fast", {heads, pf}},
                                  {"fast_anchor", {heads, pf}}};
  if (HasMomentum(o)) {
    specs.push_back({"momentum", {heads, pm}});
    specs.push_back({"fast_momentum", {heads, pf}});
  }
  if (o.conv_size > 1) {
    for (const char* name : {"conv_q", "conv_k", "conv_v"}) {
      specs.push_back({name, {o.conv_size - 1, heads * o.head_dim}});
    }
  }
  return specs;
}

absl::Status HopeRule::Run(const Context& ctx, std::span<const int32_t> rows, const kernels::BatchLayout& layout,
                           std::span<const int64_t> first_positions, LayerState& state, Tensor* out) const {
  // Anchors refresh every C tokens counted from the request's first token (A6): only the position
  // modulo lcm(C_o, C_mem) matters.
  std::vector<int32_t> phase(first_positions.size());
  for (size_t i = 0; i < phase.size(); ++i) phase[i] = static_cast<int32_t>(first_positions[i] % w_.phase_period);
  MCSERVE_ASSIGN_OR_RETURN(Tensor phase_t, Tensor::FromHostI32(phase, {static_cast<int64_t>(phase.size())}, ctx.device));
  kernels::HopeMemoryArgs a = args_;
  a.options = w_.options;
  std::vector<Tensor> keep;  // the selected rows of this pass's inputs
  MCSERVE_RETURN_IF_ERROR(SelectRowsOf(ctx, rows, {&a.x, &a.q_pre, &a.beta}, keep));
  a.skip = w_.skip ? &*w_.skip : nullptr;
  a.q_conv = &w_.q_conv;
  a.k_conv = &w_.k_conv;
  a.v_conv = &w_.v_conv;
  a.phase = &phase_t;
  a.layout = layout;
  a.memory = &state.at("memory");
  a.mem_anchor = &state.at("mem_anchor");
  a.fast = &state.at("fast");
  a.fast_anchor = &state.at("fast_anchor");
  if (HasMomentum(w_.options)) {
    a.momentum = &state.at("momentum");
    a.fast_momentum = &state.at("fast_momentum");
  }
  if (w_.options.conv_size > 1) {
    a.conv_q = &state.at("conv_q");
    a.conv_k = &state.at("conv_k");
    a.conv_v = &state.at("conv_v");
  }
  a.out = out;
  return kernels::HopeMemory(ctx, a);
}

absl::Status HopeRule::Read(const Context& /*ctx*/, const McRead& /*read*/) const {
  return absl::UnimplementedError("hope: Memory Caching is not supported");
}

absl::Status HopeRule::Restart(const Context& /*ctx*/, int slot, LayerState& state) const {
  Tensor memory = state.at("memory").Rows(slot, slot + 1);
  MCSERVE_RETURN_IF_ERROR(memory.CopyFrom(w_.initial_memory));
  Tensor fast = state.at("fast").Rows(slot, slot + 1);
  MCSERVE_RETURN_IF_ERROR(fast.CopyFrom(w_.initial_fast));
  if (HasMomentum(w_.options)) {
    MCSERVE_RETURN_IF_ERROR(ZeroSlot(state.at("momentum"), slot));
    MCSERVE_RETURN_IF_ERROR(ZeroSlot(state.at("fast_momentum"), slot));
  }
  return absl::OkStatus();
}

}  // namespace mcserve::engine
