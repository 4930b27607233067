// DeepRule: MemoryStage's view of the MLP memories (deep_rule.h).
#include "engine/mc/deep_rule.h"

#include <vector>

#include "base/status_macros.h"
#include "kernels/deep_memory/deep_mc_readout.h"

namespace mcserve::engine {

using kernels::Context;
using kernels::Tensor;

absl::Status DeepRule::Run(const Context& ctx, std::span<const int32_t> rows, const kernels::BatchLayout& layout,
                           std::span<const int64_t> first_positions, LayerState& state, Tensor* out) const {
  // Inner chunks run every b tokens from where the memory started, restarting at each constant segment.
  RowList offsets(first_positions.size());
  for (size_t i = 0; i < offsets.size(); ++i) {
    const int64_t from = w_.segment_size > 0 ? first_positions[i] % w_.segment_size : first_positions[i];
    offsets[i] = static_cast<int32_t>(from % w_.inner_chunk);
  }
  MCSERVE_ASSIGN_OR_RETURN(Tensor inner_offset,
                           Tensor::FromHostI32(offsets, {static_cast<int64_t>(offsets.size())}, ctx.device));
  kernels::DeepMemoryArgs a = args_;
  a.rule = w_.rule;
  a.expansion = static_cast<int>(w_.expansion);
  a.inner_chunk_size = static_cast<int>(w_.inner_chunk);
  a.ln_eps = w_.ln_eps;
  a.ln_weight = w_.ln_weight ? &*w_.ln_weight : nullptr;
  a.ln_bias = w_.ln_bias ? &*w_.ln_bias : nullptr;
  kernels::TensorList keep;  // the selected rows of this pass's inputs
  MCSERVE_RETURN_IF_ERROR(
      SelectRowsOf(ctx, rows, {&a.q, &a.k, &a.v, &a.step, &a.retention, &a.momentum_gate}, keep));
  a.inner_offset = &inner_offset;
  a.layout = layout;
  a.memory = &state.at("memory");
  a.momentum = a.rule == kernels::DeepMemoryRule::kTitans ? &state.at("momentum") : nullptr;
  a.anchor = w_.inner_chunk > 1 ? &state.at("anchor") : nullptr;
  a.out = out;
  return kernels::DeepMemory(ctx, a);
}

absl::Status ReadDeepPages(const Context& ctx, const McRead& r, const DeepPageReadout& how) {
  // No row reads a page: every aggregation is y = o_on, already in out. (Soup would recompute it by
  // activation mixing over the online weights alone, equal only up to rounding.)
  if (r.token_pages->dim(0) == 0) return absl::OkStatus();
  const bool mean = r.mc->aggregation == McAggregation::kMean;
  thread_local std::vector<kernels::DeepMcPage> pages;  // capacity kept: a decode step allocates nothing
  pages.clear();
  for (const kernels::McPage& p : r.pages) {
    // The mean's one page is the running sum of the cached weights: read at 1/N of it.
    const float scale = mean && r.cached > 0 ? 1.0f / static_cast<float>(r.cached) : 1.0f;
    pages.push_back({.memory = p.memory, .pooled_key = p.pooled_key, .weight_scale = scale});
  }
  kernels::DeepMcReadoutArgs readout{.activation = how.activation,
                                     .expansion = how.expansion,
                                     .top_k = r.mc->top_k,
                                     .ln_eps = how.ln_eps,
                                     .ln_weight = how.ln_weight,
                                     .ln_bias = how.ln_bias,
                                     .q = r.q,
                                     .u = r.u,
                                     .online_pool = r.pools,
                                     .online = r.out,
                                     .pages = pages,
                                     .token_page_offsets = r.offsets,
                                     .token_pages = r.token_pages,
                                     .out = r.out};
  switch (r.mc->aggregation) {
    case McAggregation::kGrm: readout.combine = kernels::DeepMcCombine::kSoftmax; break;
    case McAggregation::kSsc: readout.combine = kernels::DeepMcCombine::kTopKSoftmax; break;
    case McAggregation::kResidual: readout.combine = kernels::DeepMcCombine::kSum; break;
    case McAggregation::kSoup:  // activation mixing over the pages and the online weights
      readout.combine = kernels::DeepMcCombine::kSoup;
      if (!how.soup_keeps_online) readout.online = nullptr;
      readout.online_memory = &r.state->at(how.soup_weights);
      readout.layout = r.layout;
      break;
    case McAggregation::kMean:  // y = a·M_on(q) + a·M_θ̄(q), a = ½ for average once something is cached
      readout.combine = kernels::DeepMcCombine::kSum;
      readout.online_weight = r.mc->mean_combine == McMeanCombine::kAverage && r.cached > 0 ? 0.5f : 1.0f;
      readout.cached_weight = readout.online_weight;
      break;
  }
  return kernels::DeepMcReadout(ctx, readout);
}

absl::Status DeepRule::Read(const Context& ctx, const McRead& r) const {
  return ReadDeepPages(ctx, r,
                       {.expansion = static_cast<int>(w_.expansion),
                        .ln_eps = w_.ln_eps,
                        .ln_weight = w_.ln_weight ? &*w_.ln_weight : nullptr,
                        .ln_bias = w_.ln_bias ? &*w_.ln_bias : nullptr});
}

absl::Status DeepRule::Restart(const Context& /*ctx*/, int slot, LayerState& state) const {
  Tensor row = state.at("memory").Rows(slot, slot + 1);
  MCSERVE_RETURN_IF_ERROR(row.CopyFrom(w_.initial));
  if (w_.rule == kernels::DeepMemoryRule::kTitans) MCSERVE_RETURN_IF_ERROR(ZeroSlot(state.at("momentum"), slot));
  return absl::OkStatus();
}

}  // namespace mcserve::engine
