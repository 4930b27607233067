#include "engine/runner/feed_forward.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/runner/mixer_ops.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/linear/linear.h"
#include "kernels/rms_norm/rms_norm.h"

namespace mcserve::engine {

using kernels::Tensor;

namespace {

// One level with weights `<norm>` and `<mlp>{gate,up,down}_proj.weight`.
absl::StatusOr<FeedForwardLevel> BindLevel(const WeightBinder& w, const std::string& norm, const std::string& mlp,
                                           int64_t hidden, int64_t inter, bool swiglu) {
  FeedForwardLevel level;
  MCSERVE_ASSIGN_OR_RETURN(level.norm, w.Float(norm, {hidden}));
  if (swiglu) {
    MCSERVE_ASSIGN_OR_RETURN(level.gate_proj, w.Matrix(mlp + "gate_proj.weight", {inter, hidden}));
  }
  MCSERVE_ASSIGN_OR_RETURN(level.up_proj, w.Matrix(mlp + "up_proj.weight", {inter, hidden}));
  MCSERVE_ASSIGN_OR_RETURN(level.down_proj, w.Matrix(mlp + "down_proj.weight", {hidden, inter}));
  return level;
}

}  // namespace

absl::StatusOr<std::vector<FeedForwardLevel>> BindFeedForward(const ModelConfig& c, const WeightBinder& w,
                                                              int layer) {
  const std::string p = absl::StrCat("model.layers.", layer, ".");
  std::vector<FeedForwardLevel> levels;
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
  MCSERVE_ASSIGN_OR_RETURN(Tensor normed, NewF32(ctx, h.shape()));  // [T, H]
  for (const FeedForwardLevel& level : levels) {
    MCSERVE_RETURN_IF_ERROR(kernels::RmsNorm(ctx, {.x = &h, .weight = &level.norm, .eps = eps, .out = &normed}));
    MCSERVE_ASSIGN_OR_RETURN(Tensor up, Project(ctx, normed, level.up_proj));  // [T, I]
    if (level.gate_proj) {
      MCSERVE_ASSIGN_OR_RETURN(Tensor gate, Project(ctx, normed, *level.gate_proj));  // [T, I]
      MCSERVE_RETURN_IF_ERROR(kernels::SwiGlu(ctx, {.gate = &gate, .up = &up, .out = &up}));
    } else {
      MCSERVE_RETURN_IF_ERROR(Activate(ctx, up, kernels::ActivationKind::kGelu));
    }
    MCSERVE_RETURN_IF_ERROR(kernels::Linear(ctx, {.x = &up, .w = &level.down_proj, .out = &h, .accumulate = true}));
  }
  return absl::OkStatus();
}

}  // namespace mcserve::engine
