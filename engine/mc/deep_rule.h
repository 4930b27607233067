// DeepRule: MemoryStage's view of the MLP memories (memory_rule.h) — kernels/deep_memory's update
// with the online read-out, DeepMcReadout over checkpoint pages, and the restart of a slot from
// the learned initial weights. Built per forward pass around that pass's inputs. Engine loop thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "engine/mc/memory_rule.h"
#include "kernels/deep_memory/deep_mc_readout.h"
#include "kernels/deep_memory/deep_memory.h"

namespace mcserve::engine {

// What a deep-memory layer binds once (weights and settings), shared by every pass's DeepRule.
struct DeepMemoryWeights {
  kernels::DeepMemoryRule rule = kernels::DeepMemoryRule::kDla;
  int64_t heads = 0, d = 0, expansion = 4, inner_chunk = 1;
  int64_t segment_size = 0;  // constant MC segments (inner chunks restart at each); 0: none (first
                             // positions count from where the memory started)
  float ln_eps = 1e-6f;
  kernels::Tensor initial;                             // [1, heads, P] learned initial weights θ_0
  std::optional<kernels::Tensor> ln_weight, ln_bias;  // [heads, d] (memory_layer_norm)
};

// How an MLP memory's checkpoint pages are read (DeepRule's and HopeRule's Read).
struct DeepPageReadout {
  kernels::DeepMcActivation activation = kernels::DeepMcActivation::kGelu;  // σ of M(q) = q + W1 σ(W2 q)
  int expansion = 4;                                                       // E = expansion·d
  float ln_eps = 1e-6f;
  const kernels::Tensor* ln_weight = nullptr;  // [heads, d] (memory_layer_norm), or null
  const kernels::Tensor* ln_bias = nullptr;    // [heads, d], or null
  const char* soup_weights = "memory";         // the state tensor soup mixes as the online weights
  bool soup_keeps_online = false;              // soup rows that read no page keep o_on
};

// Aggregates the online read-out in read.out with the pages each row lists, by read.mc's aggregation
// (kernels::DeepMcReadout). Engine loop thread.
absl::Status ReadDeepPages(const kernels::Context& ctx, const McRead& read, const DeepPageReadout& how);

class DeepRule : public MemoryRule {
 public:
  // `args` holds this pass's per-row inputs (q, k, v, step and the Titans gates); the rule, its
  // settings and the layer norm come from `weights`, which outlives the rule.
  DeepRule(const DeepMemoryWeights& weights, kernels::DeepMemoryArgs args)
      : MemoryRule(args.q, args.k), w_(weights), args_(args) {}
  absl::Status Run(const kernels::Context& ctx, std::span<const int32_t> rows, const kernels::BatchLayout& layout,
                   std::span<const int64_t> first_positions, LayerState& state, kernels::Tensor* out) const override;
  absl::Status Read(const kernels::Context& ctx, const McRead& read) const override;
  // Memory back to θ_0, momentum to zero (the anchor follows at the segment's first token).
  absl::Status Restart(const kernels::Context& ctx, int slot, LayerState& state) const override;
  bool ReadsOnlineWeights(McAggregation aggregation) const override { return aggregation == McAggregation::kSoup; }

 private:
  const DeepMemoryWeights& w_;
  kernels::DeepMemoryArgs args_;
};

}  // namespace mcserve::engine
