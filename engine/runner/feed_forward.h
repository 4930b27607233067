// FeedForward: the channel-mixing half of a block, as a chain of pre-norm residual MLP levels
//   z ← z + down(act(Norm(z)) [+ b_up]) [+ b_down]      act: SwiGLU (SiLU(gate·) ⊙ up·) or GELU(up·)
// applied in order. The fla families have one SwiGLU level (mlp_norm, mlp.*); HOPE's Continuum
// Memory System has one level per cms_levels entry (cms.{j}.*) (the checkpoint's weights; with
// cms_adaptive the trained levels run per request in adaptive_cms.h instead); GAM has one
// LayerNorm + GELU level with biases (ln2, ffn.0, ffn.2).
// Bound while loading; Run from the engine loop thread.
#pragma once

#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/model_config.h"
#include "engine/runner/norm.h"
#include "engine/runner/weight_binder.h"
#include "kernels/core/context.h"
#include "kernels/core/tensor.h"

namespace mcserve::engine {

struct FeedForwardLevel {
  Norm norm;                                 // [H] RMSNorm, or LayerNorm with bias
  std::optional<kernels::Tensor> gate_proj;  // [I, H] (SwiGLU; absent: GELU)
  kernels::Tensor up_proj;                   // [I, H]
  kernels::Tensor down_proj;                 // [H, I]
  std::optional<kernels::Tensor> up_bias;    // [I] (gam)
  std::optional<kernels::Tensor> down_bias;  // [H] (gam)
};

// Binds layer `layer`'s levels for `config`, validating every weight's shape.
absl::StatusOr<std::vector<FeedForwardLevel>> BindFeedForward(const ModelConfig& config, const WeightBinder& w,
                                                              int layer);

// h [T, H] ← the chain of `levels` applied to h, in place.
absl::Status RunFeedForward(const kernels::Context& ctx, std::span<const FeedForwardLevel> levels, float eps,
                            kernels::Tensor& h);

}  // namespace mcserve::engine
