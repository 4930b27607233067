// LatticeRule: MemoryStage's view of Lattice's slot memory (memory_rule.h) — kernels/lattice_memory's
// exact sequential update with the online read-out, the matrix memories' read-out of checkpoint
// pages (a page is the slots M [H, m, d], read as Mᵀq like any matrix memory), and the restart of a
// slot from the initial slots S_0. Built per forward pass around that pass's inputs. Engine loop thread.
#pragma once

#include <span>

#include "engine/mc/memory_rule.h"
#include "kernels/lattice_memory/lattice_memory.h"

namespace mcserve::engine {

// What a lattice layer binds once, shared by every pass's LatticeRule.
struct LatticeMemoryWeights {
  kernels::LatticeMemoryVariant variant = kernels::LatticeMemoryVariant::kDec;
  bool analytic_renorm = false;
  bool normalized_readout = false;
  kernels::Tensor initial;  // [1, heads, m, d] F32: S_0 (rows = unit-norm slots)
};

class LatticeRule : public MemoryRule {
 public:
  // `args` holds this pass's per-row inputs (q, k, v, gamma and optionally mu); the variant and
  // options come from `weights`, which outlives the rule.
  LatticeRule(const LatticeMemoryWeights& weights, kernels::LatticeMemoryArgs args)
      : MemoryRule(args.q, args.k), w_(weights), args_(args) {}
  absl::Status Run(const kernels::Context& ctx, std::span<const int32_t> rows, const kernels::BatchLayout& layout,
                   std::span<const int64_t> first_positions, LayerState& state, kernels::Tensor* out) const override;
  absl::Status Read(const kernels::Context& ctx, const McRead& read) const override;
  // The slots back to S_0.
  absl::Status Restart(const kernels::Context& ctx, int slot, LayerState& state) const override;

 private:
  const LatticeMemoryWeights& w_;
  kernels::LatticeMemoryArgs args_;
};

}  // namespace mcserve::engine
