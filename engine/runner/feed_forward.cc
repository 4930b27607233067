#include "engine/runner/feed_forward.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/runner/mixer_ops.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/linear/linear.h"

namespace mcserve::engine {

using kernels::Tensor;

namespace {

// One level with weights `<norm>` and `<mlp>{gate,up,down}_proj.weight`.
absl::StatusOr<FeedForwardLevel> BindLevel(const WeightBinder& w, const std::string& norm, const std::string& mlp,
                                           int64_t hidden, int64_t inter, bool swiglu) {
  FeedForwardLevel level;
  MCSERVE_ASSIGN_OR_RETURN(level.norm, Norm::BindRms(w, norm, hidden));
  if (swiglu) {
    MCSERVE_ASSIGN_OR_RETURN(level.gate_proj, w.Matrix(mlp + "gate_proj.weight", {inter, hidden}));
  }
  MCSERVE_ASSIGN_OR_RETURN(level.up_proj, w.Matrix(mlp + "up_proj.weight", {inter, hidden}));
  MCSERVE_ASSIGN_OR_RETURN(level.down_proj, w.Matrix(mlp + "down_proj.weight", {hidden, inter}));
  return level;
}

// GAM's level: LayerNorm ln2, GELU MLP ffn.0 [I, H] / ffn.2 [H, I], both with biases.
absl::StatusOr<FeedForwardLevel> BindGamLevel(const WeightBinder& w, const std::string& p, int64_t hidden,
                                              int64_t inter) {
  FeedForwardLevel level;
  MCSERVE_ASSIGN_OR_RETURN(level.norm, Norm::BindLayerNorm(w, p + "ln2.", hidden));
  MCSERVE_ASSIGN_OR_RETURN(level.up_proj, w.Matrix(p + "ffn.0.weight", {inter, hidden}));
  MCSERVE_ASSIGN_OR_RETURN(level.up_bias, w.Float(p + "ffn.0.bias", {inter}));
  MCSERVE_ASSIGN_OR_RETURN(level.down_proj, w.Matrix(p + "ffn.2.weight", {hidden, inter}));
  MCSERVE_ASSIGN_OR_RETURN(level.down_bias, w.Float(p + "ffn.2.bias", {hidden}));
  return level;
}

// x [T, n] += bias [n] broadcast over the rows.
absl::Status AddBias(const kernels::Context& ctx, Tensor& x, const Tensor& bias) {
  MCSERVE_ASSIGN_OR_RETURN(Tensor rows, BroadcastRows(ctx, bias, x.dim(0)));  // [T, n]
  return kernels::Add(ctx, {.a = &x, .b = &rows, .out = &x});
}

}  // namespace

absl::StatusOr<std::vector<FeedForwardLevel>> BindFeedForward(const ModelConfig& c, const WeightBinder& w,
                                                              int layer) {
  const std::string p = absl::StrCat("model.layers.", layer, ".");
  std::vector<FeedForwardLevel> levels;
  if (c.family == ModelFamily::kGam) {
    MCSERVE_ASSIGN_OR_RETURN(levels.emplace_back(), BindGamLevel(w, absl::StrCat("blocks.", layer, "."),
                                                                 c.hidden_size, c.intermediate_size));
    return levels;
  }
  if (c.family != ModelFamily::kHope) {
    MCSERVE_ASSIGN_OR_RETURN(levels.emplace_back(), BindLevel(w, p + "mlp_norm.weight", p + "mlp.", c.hidden_size,
                                                              c.intermediate_size, /*swiglu=*/true));
    return levels;
  }
  for (size_t j = 0; j < c.hope.cms_levels.size(); ++j) {
    const CmsLevel& cms = c.hope.cms_levels[j];
    const std::string q = absl::StrCat(p, "cms.", j, ".");
    MCSERVE_ASSIGN_OR_RETURN(levels.emplace_back(), BindLevel(w, q + "norm.weight", q, c.hidden_size,
                                                              cms.intermediate_size, cms.swiglu));
  }
  return levels;
}

absl::Status RunFeedForward(const kernels::Context& ctx, std::span<const FeedForwardLevel> levels, float eps,
                            Tensor& h) {
  MCSERVE_ASSIGN_OR_RETURN(Tensor normed, NewF32ForOverwrite(ctx, h.shape()));  // [T, H]
  for (const FeedForwardLevel& level : levels) {
    MCSERVE_RETURN_IF_ERROR(level.norm.Apply(ctx, h, eps, normed));
    // up (and SwiGLU's gate) as one grouped GEMM: [T, I] each.
    kernels::TensorPtrList weights = {&level.up_proj};
    if (level.gate_proj) weights.push_back(&*level.gate_proj);
    MCSERVE_ASSIGN_OR_RETURN(kernels::TensorList projected, ProjectMany(ctx, normed, weights));
    Tensor& up = projected[0];
    if (level.up_bias) MCSERVE_RETURN_IF_ERROR(AddBias(ctx, up, *level.up_bias));
    if (level.gate_proj) {
      MCSERVE_RETURN_IF_ERROR(kernels::SwiGlu(ctx, {.gate = &projected[1], .up = &up, .out = &up}));
    } else {
      MCSERVE_RETURN_IF_ERROR(Activate(ctx, up, kernels::ActivationKind::kGelu));
    }
    MCSERVE_RETURN_IF_ERROR(kernels::Linear(ctx, {.x = &up, .w = &level.down_proj, .out = &h, .accumulate = true}));
    if (level.down_bias) MCSERVE_RETURN_IF_ERROR(AddBias(ctx, h, *level.down_bias));
  }
  return absl::OkStatus();
}

}  // namespace mcserve::engine
