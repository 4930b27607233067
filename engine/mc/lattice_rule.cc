// LatticeRule: MemoryStage's view of Lattice's slot memory (lattice_rule.h).
#include "engine/mc/lattice_rule.h"

#include <vector>

#include "base/status_macros.h"
#include "engine/mc/linear_rule.h"

namespace mcserve::engine {

using kernels::Context;
using kernels::Tensor;

absl::Status LatticeRule::Run(const Context& ctx, std::span<const int32_t> rows, const kernels::BatchLayout& layout,
                              std::span<const int64_t> /*first_positions*/, LayerState& state, Tensor* out) const {
  kernels::TensorList keep;  // the selected rows of this pass's inputs
  kernels::LatticeMemoryArgs a = args_;
  MCSERVE_RETURN_IF_ERROR(SelectRowsOf(ctx, rows, {&a.q, &a.k, &a.v, &a.gamma, &a.mu}, keep));
  a.variant = w_.variant;
  a.analytic_renorm = w_.analytic_renorm;
  a.normalized_readout = w_.normalized_readout;
  a.layout = layout;
  a.state = &state.at("memory");
  a.out = out;
  return kernels::LatticeMemory(ctx, a);
}

absl::Status LatticeRule::Read(const Context& ctx, const McRead& read) const { return ReadMatrixPages(ctx, read); }

absl::Status LatticeRule::Restart(const Context& /*ctx*/, int slot, LayerState& state) const {
  Tensor row = state.at("memory").Rows(slot, slot + 1);
  return row.CopyFrom(w_.initial);
}

}  // namespace mcserve::engine
