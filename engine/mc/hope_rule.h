// HopeRule: MemoryStage's view of HOPE's self-modifying Titans memories (memory_rule.h) —
// kernels/hope_memory's per-token scan with its read-out, and the restart of a slot from the learned
// initial fast weights. Memory Caching on hope is not defined yet, so the stage never asks it to read
// checkpoints (the mixer refuses a memory_caching config). Built per forward pass around that pass's
// inputs. Engine loop thread.
#pragma once

#include <span>

#include "engine/mc/memory_rule.h"
#include "kernels/hope_memory/hope_memory.h"

namespace mcserve::engine {

// What a hope layer binds once, shared by every pass's HopeRule.
struct HopeMemoryWeights {
  kernels::HopeMemoryOptions options;
  int64_t phase_period = 1;               // lcm(C_o, C_mem): positions are passed modulo it
  kernels::Tensor initial_memory;         // [1, heads, Pm] F32 learned initial M_mem weights
  kernels::Tensor initial_fast;           // [1, heads, Pf] F32 learned initial k, v, eta, alpha (, q)
  std::optional<kernels::Tensor> skip;    // [2, heads, d] F32 (scalar_memory_skip linear)
  kernels::Tensor q_conv, k_conv, v_conv; // [heads·d, 1, K] F32
};

class HopeRule : public MemoryRule {
 public:
  // `args` holds this pass's per-row inputs (x, q_pre, beta); the settings and weights come from
  // `weights`, which outlives the rule.
  HopeRule(const HopeMemoryWeights& weights, kernels::HopeMemoryArgs args)
      : MemoryRule(args.x, args.x), w_(weights), args_(args) {}
  absl::Status Run(const kernels::Context& ctx, std::span<const int32_t> rows, const kernels::BatchLayout& layout,
                   std::span<const int64_t> first_positions, LayerState& state, kernels::Tensor* out) const override;
  // Unimplemented: no checkpoint is ever read on hope.
  absl::Status Read(const kernels::Context& ctx, const McRead& read) const override;
  // Running weights back to the learned initial ones, momentum to zero (anchors follow at t = 1).
  absl::Status Restart(const kernels::Context& ctx, int slot, LayerState& state) const override;

  // The state tensors one slot needs (memory, mem_anchor, fast, fast_anchor, momenta, conv windows).
  static std::vector<StateSpec> StateSpecs(const kernels::HopeMemoryOptions& o, int64_t heads);

 private:
  const HopeMemoryWeights& w_;
  kernels::HopeMemoryArgs args_;
};

}  // namespace mcserve::engine
