// AdaptiveCmsLayer: one HOPE block's Continuum Memory System with test-time training
// (docs/model-format.md, `hope`, cms_adaptive). Every level with lr > 0 keeps, per slot, Δ = θ − θ₀
// (its weights minus the checkpoint's, so a zeroed slot means "checkpoint weights") and a gradient
// accumulator G, both [num_slots, …] state tensors (prefix reuse snapshots them). The layer also
// saves its last token's input x and mid-block residual h per slot, from which the backward of that
// token's loss is recomputed when its target arrives. Bound while loading; the rest from the engine
// loop thread, one token of one slot at a time.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/model_config.h"
#include "engine/runner/state_pool.h"
#include "engine/runner/weight_binder.h"
#include "kernels/core/context.h"
#include "kernels/core/tensor.h"

namespace mcserve::engine {

class AdaptiveCmsLayer {
 public:
  // Layer `layer`'s F32 CMS weights (every level), their transposes (static levels) and attn_norm.
  static absl::StatusOr<AdaptiveCmsLayer> Bind(const ModelConfig& c, const WeightBinder& w, int layer);

  // Appends Δ and G of every adaptive level ("cms.{j}.delta.{up,gate,down}", "cms.{j}.grad.…") and the
  // saved last token ("cms_last_x", "cms_last_h", [hidden] each).
  void AddStateSpecs(std::vector<StateSpec>* specs) const;
  // A request's start: Δ = G = 0 for `slot`.
  absl::Status Restart(int slot, LayerState& state) const;
  // Before the token after `position` tokens: every level with position % C == 0 (position > 0)
  // applies θ −= lr·G (Δ −= lr·G) and G = 0.
  absl::Status ApplyBoundaries(const kernels::Context& ctx, int slot, int64_t position, LayerState& state) const;
  // Saves x [1, hidden] (the block input) or h [1, hidden] (after the mixer) of slot's token.
  absl::Status SaveLast(int slot, const char* name, const kernels::Tensor& row, LayerState& state) const;
  // h [1, hidden] ← the CMS chain applied to slot's row with the slot's weights θ₀ + Δ (in place).
  absl::Status Forward(const kernels::Context& ctx, int slot, LayerState& state, kernels::Tensor& h) const;
  // The saved token's CMS backward: dz [1, hidden] = ∂L/∂(CMS output) in, ∂L/∂(CMS input) out;
  // G += ∂L/∂θ of every adaptive level.
  absl::Status Backward(const kernels::Context& ctx, int slot, LayerState& state, kernels::Tensor& dz) const;
  // dz [1, hidden] += RMSNormᵀ(attn_norm) du for the saved block input x (the mixer branch's backward).
  absl::Status AddAttnNormBackward(const kernels::Context& ctx, int slot, LayerState& state, const kernels::Tensor& du,
                                   kernels::Tensor& dz) const;
  // u [1, hidden] = attn_norm(saved x) of slot.
  absl::StatusOr<kernels::Tensor> SavedNormedInput(const kernels::Context& ctx, int slot, LayerState& state) const;

 private:
  // One level's F32 weights and their transposes for the backward.
  struct Weights {
    std::optional<kernels::Tensor> gate, gate_t;  // [F, D], [D, F] (SwiGLU)
    kernels::Tensor up, up_t;                     // [F, D], [D, F]
    kernels::Tensor down, down_t;                 // [D, F], [F, D]
  };
  // One level: its F32 norm, and (adaptive) the checkpoint θ₀ plus lr and C.
  struct Level {
    kernels::Tensor norm;                // [D] F32
    bool adaptive = false;
    double lr = 0.0;
    int64_t chunk_size = 1;
    Weights theta0;                      // F32 θ₀ (transposes only for static levels)
    int64_t inter = 0;
  };
  // One level's forward values of a row, kept for its backward.
  struct Trace {
    kernels::Tensor z_in, normed, gate, up, m;  // [1, D], [1, D], [1, F] ×3
  };

  // The slot's weights of level j: θ₀ (static) or θ₀ + Δ with transposes (adaptive).
  // Transposes only when `transposes` (the backward).
  absl::StatusOr<Weights> SlotWeights(const kernels::Context& ctx, int j, int slot, LayerState& state,
                                      bool transposes) const;
  // z [1, D] ← z + MLP_j(norm_j(z)) with weights wt; returns the trace.
  absl::StatusOr<Trace> LevelForward(const kernels::Context& ctx, int j, const Weights& wt, kernels::Tensor& z) const;
  // Level j's backward from its trace: G_j += ∂L/∂θ (adaptive), dz ← ∂L/∂z_in.
  absl::Status LevelBackward(const kernels::Context& ctx, int j, const Weights& wt, const Trace& tr, int slot,
                             LayerState& state, kernels::Tensor& dz) const;
  std::string Name(int j, const char* kind, const char* weight) const;

  std::vector<Level> levels_;
  kernels::Tensor attn_norm_;  // [D] F32
  int64_t hidden_ = 0;
  float eps_ = 1e-6f;
};

}  // namespace mcserve::engine
