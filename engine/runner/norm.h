// Norm: a block's pre-norm, RMSNorm (weight only: the fla families, hope) or affine LayerNorm
// (weight and bias: gam). Bound while loading; Apply from the engine loop thread.
#pragma once

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "kernels/core/context.h"
#include "kernels/core/tensor.h"
#include "engine/runner/weight_binder.h"

namespace mcserve::engine {

struct Norm {
  kernels::Tensor weight;               // [H]
  std::optional<kernels::Tensor> bias;  // [H]: LayerNorm; absent: RMSNorm

  // RMSNorm with `weight_name` [h].
  static absl::StatusOr<Norm> BindRms(const WeightBinder& w, const std::string& weight_name, int64_t h);
  // LayerNorm with `<prefix>weight` and `<prefix>bias` [h].
  static absl::StatusOr<Norm> BindLayerNorm(const WeightBinder& w, const std::string& prefix, int64_t h);

  // out [T, H] ← norm(x [T, H]) with epsilon eps; out may alias x.
  absl::Status Apply(const kernels::Context& ctx, const kernels::Tensor& x, float eps, kernels::Tensor& out) const;
};

}  // namespace mcserve::engine
