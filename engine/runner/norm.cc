#include "engine/runner/norm.h"

#include "base/status_macros.h"
#include "kernels/layer_norm/layer_norm.h"
#include "kernels/rms_norm/rms_norm.h"

namespace mcserve::engine {

absl::StatusOr<Norm> Norm::BindRms(const WeightBinder& w, const std::string& weight_name, int64_t h) {
  Norm n;
  MCSERVE_ASSIGN_OR_RETURN(n.weight, w.Float(weight_name, {h}));
  return n;
}

absl::StatusOr<Norm> Norm::BindLayerNorm(const WeightBinder& w, const std::string& prefix, int64_t h) {
  Norm n;
  MCSERVE_ASSIGN_OR_RETURN(n.weight, w.Float(prefix + "weight", {h}));
  MCSERVE_ASSIGN_OR_RETURN(n.bias, w.Float(prefix + "bias", {h}));
  return n;
}

absl::Status Norm::Apply(const kernels::Context& ctx, const kernels::Tensor& x, float eps, kernels::Tensor& out) const {
  if (bias) {
    return kernels::LayerNorm(ctx, {.x = &x, .weight = &weight, .bias = &*bias, .eps = eps, .out = &out});
  }
  return kernels::RmsNorm(ctx, {.x = &x, .weight = &weight, .eps = eps, .out = &out});
}

}  // namespace mcserve::engine
