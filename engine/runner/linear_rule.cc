// LinearRule: MemoryStage's view of the matrix memories (memory_rule.h).
#include <vector>

#include "engine/runner/memory_rule.h"
#include "kernels/core/status_macros.h"
#include "kernels/mc_readout/mc_readout.h"

namespace mcserve::engine {

using kernels::Context;
using kernels::Tensor;

absl::Status LinearRule::Run(const Context& ctx, int64_t begin, int64_t end, const kernels::BatchLayout& layout,
                             std::span<const int64_t> /*first_positions*/, LayerState& state, Tensor* out) const {
  std::vector<Tensor> rows;  // views of this pass's per-row inputs, stable below
  rows.reserve(7);
  auto slice = [&](const Tensor* t) -> const Tensor* {
    if (t == nullptr) return nullptr;
    rows.push_back(t->Rows(begin, end));
    return &rows.back();
  };
  kernels::LinearMemoryArgs a = args_;
  a.q = slice(args_.q);
  a.k = slice(args_.k);
  a.v = slice(args_.v);
  a.key_decay = slice(args_.key_decay);
  a.decay = slice(args_.decay);
  a.beta = slice(args_.beta);
  a.gamma = slice(args_.gamma);
  a.layout = layout;
  a.state = &state.at("memory");
  a.aux = aux_.empty() ? nullptr : &state.at(aux_);
  a.out = out;
  return kernels::LinearMemory(ctx, a);
}

absl::Status LinearRule::Read(const Context& ctx, const McRead& r) const {
  std::vector<kernels::McPage> pages;
  pages.reserve(r.pages.size());
  for (const McPageRef& p : r.pages) pages.push_back({.memory = p.memory, .pooled_key = p.pooled_key});
  kernels::McReadoutArgs readout{.q = r.q, .u = r.u, .online_pool = r.pools, .online = r.out, .pages = pages,
                                 .token_page_offsets = r.offsets, .token_pages = r.token_pages, .out = r.out};
  switch (r.mc->aggregation) {
    case McAggregation::kGrm:
    case McAggregation::kSoup:  // identical to GRM for linear memories (docs/memory-caching.md)
      readout.combine = kernels::McCombine::kSoftmax;
      break;
    case McAggregation::kSsc:
      readout.combine = kernels::McCombine::kTopKSoftmax;
      readout.top_k = r.mc->top_k;
      break;
    case McAggregation::kResidual:
      readout.combine = kernels::McCombine::kSum;
      break;
    case McAggregation::kMean:  // one sequence: y = a·o_on + a·(1/N)·Σ S_iᵀq, the sum pre-added
      readout.combine = kernels::McCombine::kSum;
      readout.online_weight = r.mc->mean_combine == McMeanCombine::kAverage && r.cached > 0 ? 0.5f : 1.0f;
      readout.cached_weight = r.cached > 0 ? readout.online_weight / static_cast<float>(r.cached) : 0.0f;
      break;
  }
  return kernels::McReadout(ctx, readout);
}

absl::Status LinearRule::Restart(const Context& /*ctx*/, int slot, LayerState& state) const {
  return ZeroSlot(state.at("memory"), slot);
}

}  // namespace mcserve::engine
