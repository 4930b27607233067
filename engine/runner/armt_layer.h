// ArmtLayer: one ARMT layer (docs/model-format.md, `armt`): the associative read added to the
// residual stream, the unchanged GPT-2 block (pre-LN causal attention over the slot's open-segment
// KV cache, tanh-GELU MLP, biases), and the write of the memory-token outputs into the layer's
// A [F, D], z [F]. Bound while loading (HF Conv1D weights transposed by the WeightBinder); Run*
// from the engine loop thread.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/model_config.h"
#include "engine/runner/norm.h"
#include "engine/runner/state_pool.h"
#include "engine/runner/weight_binder.h"
#include "kernels/core/batch_layout.h"
#include "kernels/core/context.h"
#include "kernels/core/tensor.h"

namespace mcserve::engine {

// The device tensors of one Forward's rows, shared by every layer.
struct ArmtRows {
  kernels::BatchLayout layout;           // every chunk: cu_seqlens [B + 1], slot_ids [B]
  const kernels::Tensor* cached = nullptr;  // [B] I32: content tokens already in each slot's KV cache
  // The close chunks' memory rows (empty when no chunk closes): their row ids in the batch [Mc],
  // a layout over them (cu [C + 1], slots [C]) and first [C] I32 (1 for a slot's first write).
  const kernels::Tensor* close_rows = nullptr;
  kernels::BatchLayout close_layout;
  const kernels::Tensor* close_first = nullptr;
  bool any_close = false;
};

class ArmtLayer {
 public:
  // Binds layer `layer`'s weights (official names, memory_cell.model.transformer.h.{layer}.*).
  static absl::StatusOr<ArmtLayer> Bind(const ModelConfig& c, const WeightBinder& w, int layer);

  // The per-slot state of this layer: assoc_a [F, D], assoc_z [F], and the open segment's
  // k_cache, v_cache [S + M, heads, head_dim] (scratch: empty after each close).
  std::vector<StateSpec> StateSpecs() const;

  // h [T, D] ← read, GPT-2 block, then (rows.any_close) the write of the close rows' outputs.
  absl::Status Run(const kernels::Context& ctx, const ArmtRows& rows, LayerState& state, kernels::Tensor& h) const;

 private:
  // h [T, D] += φ(h W_mqᵀ) A / (φ(h W_mqᵀ)·z + eps), every row with its slot's pre-write memory.
  absl::Status Read(const kernels::Context& ctx, const ArmtRows& rows, LayerState& state, kernels::Tensor& h) const;
  // h [T, D] += c_proj(attention(LN_1(h))) over the slots' KV caches (the rows appended to them).
  absl::Status Attend(const kernels::Context& ctx, const ArmtRows& rows, LayerState& state, kernels::Tensor& h) const;
  // h [T, D] += c_proj(gelu_tanh(c_fc(LN_2(h)))).
  absl::Status Mlp(const kernels::Context& ctx, kernels::Tensor& h) const;
  // Writes the close rows' outputs O = h[close_rows] [Mc, D] into their slots' A, z (parallel form).
  absl::Status Write(const kernels::Context& ctx, const ArmtRows& rows, LayerState& state,
                     const kernels::Tensor& h) const;

  int64_t d_ = 0, heads_ = 0, head_dim_ = 0, feat_ = 0, capacity_ = 0;
  float eps_ = 1e-5f;
  bool correction_ = true;
  kernels::Tensor w_mq_, w_mk_;      // [P, D]
  kernels::Tensor w_mv_;             // [D, D]
  kernels::Tensor w_mb_;             // [1, D]
  kernels::Tensor b_mb_;             // [1]
  Norm ln_1_, ln_2_;                 // [D] LayerNorm with bias
  kernels::Tensor w_q_, w_k_, w_v_;  // [D, D] each: c_attn [D, 3D] transposed, split by rows
  kernels::Tensor b_q_, b_k_, b_v_;  // [D] each
  kernels::Tensor w_o_, b_o_;        // [D, D], [D]
  kernels::Tensor w_fc_, b_fc_;      // [I, D], [I]
  kernels::Tensor w_proj_, b_proj_;  // [D, I], [D]
};

}  // namespace mcserve::engine
