// LinearRule: MemoryStage's view of the matrix memories (memory_rule.h) — kernels/linear_memory's
// update with the online read-out, McReadout over checkpoint pages, and the restart of a slot from a
// zero memory. Built per forward pass around that pass's inputs. Engine loop thread.
#pragma once

#include <span>
#include <string>
#include <utility>

#include "engine/mc/memory_rule.h"
#include "kernels/linear_memory/linear_memory.h"

namespace mcserve::engine {

// `args` holds this pass's per-row inputs (q, k and v set, gates as the family needs) and the
// kernel's rule; layout, state, aux and out are set per run. `aux` names the rule's auxiliary state
// ("" for none; MemoryStage resets it at segment starts as its Aux says).
// The matrix memories' read-out of checkpoint pages (o = Sᵀq per page, combined by mc.aggregation's
// rule through McReadout); shared by LinearRule and LatticeRule.
absl::Status ReadMatrixPages(const kernels::Context& ctx, const McRead& read);

class LinearRule : public MemoryRule {
 public:
  LinearRule(kernels::LinearMemoryArgs args, std::string aux)
      : MemoryRule(args.q, args.k), args_(args), aux_(std::move(aux)) {}
  absl::Status Run(const kernels::Context& ctx, std::span<const int32_t> rows, const kernels::BatchLayout& layout,
                   std::span<const int64_t> first_positions, LayerState& state, kernels::Tensor* out) const override;
  absl::Status Read(const kernels::Context& ctx, const McRead& read) const override;
  absl::Status Restart(const kernels::Context& ctx, int slot, LayerState& state) const override;

 private:
  kernels::LinearMemoryArgs args_;
  std::string aux_;
};

}  // namespace mcserve::engine
