// HopeRule: MemoryStage's view of HOPE's M_mem (memory_rule.h). HOPE's scan runs in two halves
// (kernels/hope_memory): HopeFeatures — the other memories (M_k, M_v, M_eta, M_alpha, M_q), the convs
// and the gates, which Memory Caching neither caches nor restarts — writes q, k, v, α, η per row, and
// this rule runs HopeMemWrite (M_mem alone) over the stage's rows, reads cached M_mem pages through
// DeepMcReadout (σ = memory_activation, no layer norm) and restarts M_mem for independent segments.
// The anchor refresh stays on the request's global phase (docs/memory-caching.md, decision 2). Built
// per forward pass around that pass's features. Engine loop thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

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
  bool soup = false;                      // MC soup: HopeMemWrite keeps the weights each row read ("mem_read")
};

// The features of one pass that M_mem consumes (HopeFeatures' outputs), and where each row sits in its
// request.
struct HopeMemInputs {
  const kernels::Tensor* q = nullptr;      // [T, H, d] read-out query (L2(SiLU(conv q~)))
  const kernels::Tensor* k = nullptr;      // [T, H, d] key as the write sees it (pooled per segment)
  const kernels::Tensor* v = nullptr;      // [T, H, d]
  const kernels::Tensor* alpha = nullptr;  // [T, H]
  const kernels::Tensor* eta = nullptr;    // [T, H]
  const kernels::Tensor* beta = nullptr;   // [T, H] (momentum data, else null)
  std::span<const int64_t> row_positions;  // [T] tokens of the request before each row
};

class HopeRule : public MemoryRule {
 public:
  // `weights` and the tensors of `in` outlive the rule.
  HopeRule(const HopeMemoryWeights& weights, HopeMemInputs in) : MemoryRule(in.q, in.k), w_(weights), in_(in) {}
  // HopeMemWrite over `rows`; each sequence's anchor phase is its first row's position in the request.
  absl::Status Run(const kernels::Context& ctx, std::span<const int32_t> rows, const kernels::BatchLayout& layout,
                   std::span<const int64_t> first_positions, LayerState& state, kernels::Tensor* out) const override;
  // DeepMcReadout of M_mem pages [H, Pm] (σ = memory_activation; soup reads "mem_read").
  absl::Status Read(const kernels::Context& ctx, const McRead& read) const override;
  // M_mem's running weights and anchor back to the learned initial ones, its momentum to zero.
  absl::Status Restart(const kernels::Context& ctx, int slot, LayerState& state) const override;
  bool ReadsOnlineWeights(McAggregation aggregation) const override { return aggregation == McAggregation::kSoup; }

  // M_mem at a memory's start: running weights and anchor from the learned initial ones, zero momentum.
  static absl::Status RestartMem(const HopeMemoryWeights& w, int slot, LayerState& state);
  // The fast memories at a request's start: learned initial weights, zero momentum.
  static absl::Status RestartFast(const HopeMemoryWeights& w, int slot, LayerState& state);
  // The state tensors one slot needs (memory, mem_anchor, fast, fast_anchor, momenta, conv windows;
  // mem_read with soup).
  static std::vector<StateSpec> StateSpecs(const HopeMemoryWeights& w, int64_t heads);
  // M_mem's state besides "memory" that independent logarithmic MC copies per level.
  static std::vector<StateSpec> MemStates(const kernels::HopeMemoryOptions& o, int64_t heads);

 private:
  const HopeMemoryWeights& w_;
  HopeMemInputs in_;
};

}  // namespace mcserve::engine
