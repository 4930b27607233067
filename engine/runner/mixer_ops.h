// Building blocks the mixers share: projections, the short-convolution token pipeline, per-head
// q/k normalisation and the output norm + gate + o_proj. Engine loop thread.
#pragma once

#include <cmath>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/core/batch_layout.h"
#include "kernels/core/context.h"
#include "kernels/core/tensor.h"
#include "kernels/elementwise/elementwise.h"
#include "engine/runner/state_pool.h"
#include "engine/runner/weight_binder.h"

namespace mcserve::engine {

// A new zero F32 tensor on the context's device.
absl::StatusOr<kernels::Tensor> NewF32(const kernels::Context& ctx, kernels::Shape shape);
// A new F32 tensor whose contents are unspecified (Tensor::ForOverwrite), for the output of the op
// that the caller runs next and that writes it whole (a projection, a norm, a gather, the short conv).
absl::StatusOr<kernels::Tensor> NewF32ForOverwrite(const kernels::Context& ctx, kernels::Shape shape);

// vec [n] repeated as rows → [rows, n].
absl::StatusOr<kernels::Tensor> BroadcastRows(const kernels::Context& ctx, const kernels::Tensor& vec,
                                              int64_t rows);

// x [T, H, D] with head h of `heads` (a multiple of H) reading head h / (heads / H) → [T, heads, D]
// (fla's GQA/GVA repetition); x itself when H == heads.
absl::StatusOr<kernels::Tensor> ExpandHeads(const kernels::Context& ctx, const kernels::Tensor& x, int64_t heads);

// Rows `rows` of t [T, ...] (repeats allowed) → [rows.size(), ...].
absl::StatusOr<kernels::Tensor> GatherRows(const kernels::Context& ctx, const kernels::Tensor& t,
                                           std::span<const int32_t> rows);

// x [T, in] · wᵀ → [T, out].
absl::StatusOr<kernels::Tensor> Project(const kernels::Context& ctx, const kernels::Tensor& x,
                                        const kernels::Tensor& w);

// x [T, in] through every w_i [out_i, in] as one grouped GEMM (one thread-pool hand-off at decode;
// results bit-equal to Project each) → [T, out_i] in order.
absl::StatusOr<kernels::TensorList> ProjectMany(const kernels::Context& ctx, const kernels::Tensor& x,
                                                         std::span<const kernels::Tensor* const> weights);

// One projected input stream of a mixer: W x, then either a causal short conv with SiLU whose
// window lives in state `state_name` ([slots, W−1, D]), or (without conv) an activation.
struct ConvProjection {
  kernels::Tensor w;                     // [D, hidden]
  std::optional<kernels::Tensor> conv;   // [D, 1, W]
  std::optional<kernels::Tensor> taps;   // [W, D]: conv transposed, for DeltaDecode (CPU weights only)
  std::string state_name;                // conv window state
  kernels::ActivationKind act_without_conv = kernels::ActivationKind::kIdentity;

  // Binds `<prefix>_proj.weight` and, when use_conv, `<prefix>_conv1d.weight`.
  static absl::StatusOr<ConvProjection> Bind(const WeightBinder& w, const std::string& attn, const std::string& name,
                                             int64_t dim, int64_t hidden, bool use_conv, int64_t conv_size);
  // State needed per slot (none without conv).
  void AddStateSpec(int64_t conv_size, std::vector<StateSpec>* specs) const;
  // x [T, hidden] → [T, D]; conv_silu selects SiLU after the conv.
  absl::StatusOr<kernels::Tensor> Run(const kernels::Context& ctx, const kernels::Tensor& x,
                                      const kernels::BatchLayout& layout, LayerState& state,
                                      bool conv_silu = true) const;
  // The same after the projection: projected = x·wᵀ [T, D] (from ProjectMany) → [T, D].
  absl::StatusOr<kernels::Tensor> RunProjected(const kernels::Context& ctx, kernels::Tensor projected,
                                               const kernels::BatchLayout& layout, LayerState& state,
                                               bool conv_silu = true) const;
};

// In place over rows of `x` viewed as [rows, n]: L2 (eps 1e-6) or sum normalisation, times scale.
absl::Status NormalizeRows(const kernels::Context& ctx, kernels::Tensor& x, int64_t n, bool l2, float eps,
                           float scale);
// In place: x = act(x) · scale.
absl::Status Activate(const kernels::Context& ctx, kernels::Tensor& x, kernels::ActivationKind kind,
                      float scale = 1.0f);

// The mixer output stage: per-head RMSNorm of o [T, heads, V] with weight [V] (times swish(g) when
// `gate` [T, heads·V] is given), merged heads, then o_proj [hidden, heads·V] into out [T, hidden].
absl::Status OutputStage(const kernels::Context& ctx, kernels::Tensor& o, const kernels::Tensor& norm_weight,
                         const kernels::Tensor* gate, float eps, const kernels::Tensor& o_proj,
                         kernels::Tensor* out);

// The memory read-out query scale used by every family: d^-0.5.
inline float QueryScale(int64_t d) { return 1.0f / std::sqrt(static_cast<float>(d)); }

}  // namespace mcserve::engine
