// Lattice (docs/model-format.md, `lattice`): q and k from one shared projection (or two) through two
// causal short convs, v = W_v x, step size γ = σ(b_proj x), forget gate μ = σ(f_proj x); the orthogonal
// state recurrence over unit-norm slots (kernels/lattice_memory, with Memory Caching through
// MemoryStage and LatticeRule), read after each token's write; then the optional per-head RMSNorm,
// the GELU post-gate and o_proj.
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/mc/lattice_rule.h"
#include "engine/runner/mixer.h"
#include "engine/runner/mixer_ops.h"
#include "engine/runner/qkv_pipeline.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/linear/linear.h"
#include "kernels/rms_norm/rms_norm.h"
#include "kernels/short_conv/short_conv.h"

namespace mcserve::engine {
namespace {

using kernels::Context;
using kernels::Tensor;

// S_0 as [1, heads, m, d]: `<attn>s0` when initial_state is learned (or auto and present), else I[:m, :d].
absl::StatusOr<Tensor> InitialSlots(const ModelConfig& c, const WeightBinder& w, const std::string& attn) {
  const int64_t heads = c.num_heads, m = c.head_k_dim, d = c.head_v_dim;
  const std::string name = attn + "s0";
  const LatticeInit init = c.lattice.initial_state;
  if (init == LatticeInit::kLearned || (init == LatticeInit::kAuto && w.Has(name))) {
    MCSERVE_ASSIGN_OR_RETURN(Tensor s0, w.Float(name, {heads, m, d}));
    return s0.Reshape({1, heads, m, d});
  }
  std::vector<float> eye(static_cast<size_t>(heads * m * d), 0.0f);
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t i = 0; i < m; ++i) eye[static_cast<size_t>((h * m + i) * d + i)] = 1.0f;
  }
  return Tensor::FromHost(eye, {1, heads, m, d}, w.device());
}

class LatticeMixer : public Mixer {
 public:
  static absl::StatusOr<std::unique_ptr<Mixer>> Make(const ModelConfig& c, const WeightBinder& w, int layer) {
    auto mx = std::make_unique<LatticeMixer>();
    const std::string attn = absl::StrCat("model.layers.", layer, ".attn.");
    const int64_t hidden = c.hidden_size, heads = c.num_heads, m = c.head_k_dim, d = c.head_v_dim;
    mx->heads_ = heads;
    mx->m_ = m;
    mx->d_ = d;
    mx->conv_size_ = c.use_short_conv ? c.conv_size : 0;
    mx->options_ = c.lattice;
    mx->eps_ = c.norm_eps;
    if (c.lattice.shared_qk) {
      MCSERVE_ASSIGN_OR_RETURN(mx->q_proj_, w.Matrix(attn + "qk_proj.weight", {heads * m, hidden}));
      mx->k_proj_ = mx->q_proj_;
    } else {
      MCSERVE_ASSIGN_OR_RETURN(mx->q_proj_, w.Matrix(attn + "q_proj.weight", {heads * m, hidden}));
      MCSERVE_ASSIGN_OR_RETURN(mx->k_proj_, w.Matrix(attn + "k_proj.weight", {heads * m, hidden}));
    }
    if (c.use_short_conv) {
      MCSERVE_ASSIGN_OR_RETURN(mx->q_conv_, w.Float(attn + "q_conv1d.weight", {heads * m, 1, c.conv_size}));
      MCSERVE_ASSIGN_OR_RETURN(mx->k_conv_, w.Float(attn + "k_conv1d.weight", {heads * m, 1, c.conv_size}));
    }
    MCSERVE_ASSIGN_OR_RETURN(mx->v_proj_, w.Matrix(attn + "v_proj.weight", {heads * d, hidden}));
    MCSERVE_ASSIGN_OR_RETURN(mx->b_proj_, w.Matrix(attn + "b_proj.weight", {heads, hidden}));
    if (c.lattice.use_forget_gate) {
      MCSERVE_ASSIGN_OR_RETURN(mx->f_proj_, w.Matrix(attn + "f_proj.weight", {heads, hidden}));
    }
    if (c.use_gate) {
      MCSERVE_ASSIGN_OR_RETURN(mx->g_proj_, w.Matrix(attn + "g_proj.weight", {heads * d, hidden}));
    }
    if (c.lattice.use_output_norm) {
      MCSERVE_ASSIGN_OR_RETURN(mx->o_norm_, w.Float(attn + "o_norm.weight", {d}));
    }
    MCSERVE_ASSIGN_OR_RETURN(mx->o_proj_, w.Matrix(attn + "o_proj.weight", {hidden, heads * d}));
    LatticeMemoryWeights& mw = mx->memory_weights_;
    mw.variant = static_cast<kernels::LatticeMemoryVariant>(c.lattice.variant);
    mw.analytic_renorm = c.lattice.analytic_renorm;
    mw.normalized_readout = c.lattice.normalized_readout;
    MCSERVE_ASSIGN_OR_RETURN(mw.initial, InitialSlots(c, w, attn));
    if (c.memory_caching && c.lattice.normalized_readout) {
      return absl::UnimplementedError("lattice: memory_caching with \"readout\": \"normalized\" is not supported");
    }
    MCSERVE_ASSIGN_OR_RETURN(mx->memory_, MemoryStage::Bind(c, w, layer,
                                                            {.q_heads = heads, .k_heads = heads,
                                                             .state_heads = heads, .dk = m, .dv = d},
                                                            {}, /*normalized=*/false));
    return mx;
  }

  std::vector<StateSpec> StateSpecs() const override {
    std::vector<StateSpec> specs = {{"memory", {heads_, m_, d_}}};
    if (q_conv_) {
      // One window per conv; with a shared projection both hold the same inputs.
      specs.push_back({"conv_q", {conv_size_ - 1, heads_ * m_}});
      specs.push_back({"conv_k", {conv_size_ - 1, heads_ * m_}});
    }
    memory_.AddStateSpecs(&specs);
    return specs;
  }

  absl::Status Forward(const Context& ctx, const Tensor& x, const MixerBatch& batch, LayerState& state,
                       Tensor* out) const override {
    const int64_t t = x.dim(0);
    MCSERVE_ASSIGN_OR_RETURN(Tensor q, QueryOrKey(ctx, x, q_proj_, q_conv_, "conv_q", batch.layout, state));
    MCSERVE_ASSIGN_OR_RETURN(Tensor k, QueryOrKey(ctx, x, k_proj_, k_conv_, "conv_k", batch.layout, state));
    if (options_.qk_l2) {
      MCSERVE_RETURN_IF_ERROR(NormalizeRows(ctx, q, m_, /*l2=*/true, 1e-6f, 1.0f));
      MCSERVE_RETURN_IF_ERROR(NormalizeRows(ctx, k, m_, /*l2=*/true, 1e-6f, 1.0f));
    }
    MCSERVE_ASSIGN_OR_RETURN(Tensor q3, q.Reshape({t, heads_, m_}));  // [T, H, m]
    MCSERVE_ASSIGN_OR_RETURN(Tensor k3, k.Reshape({t, heads_, m_}));  // [T, H, m]
    MCSERVE_ASSIGN_OR_RETURN(Tensor v, Project(ctx, x, v_proj_));
    MCSERVE_ASSIGN_OR_RETURN(Tensor v3, v.Reshape({t, heads_, d_}));  // [T, H, d]
    MCSERVE_ASSIGN_OR_RETURN(Tensor gamma, SigmoidGate(ctx, x, b_proj_));  // [T, H]
    std::optional<Tensor> mu;                                               // [T, H]
    if (f_proj_) {
      MCSERVE_ASSIGN_OR_RETURN(mu, SigmoidGate(ctx, x, *f_proj_));
    }
    const LatticeRule rule(memory_weights_,
                           {.q = &q3, .k = &k3, .v = &v3, .gamma = &gamma, .mu = mu ? &*mu : nullptr});
    // A sequence at position 0 starts from S_0 (slots are zeroed on reset).
    for (size_t i = 0; i < batch.slots.size(); ++i) {
      if (batch.positions[i] == 0) MCSERVE_RETURN_IF_ERROR(rule.Restart(ctx, batch.slots[i], state));
    }
    MCSERVE_ASSIGN_OR_RETURN(Tensor o, NewF32(ctx, {t, heads_, d_}));  // [T, H, d]
    MCSERVE_RETURN_IF_ERROR(memory_.Run(ctx, x, rule, batch, state, &o));
    return Output(ctx, x, o, out);
  }

 private:
  // act(ShortConv(W x)) with the window in state `window` ([slots, W−1, H·m]), or act(W x) without
  // convs; act is SiLU with conv_activation silu, else none. → [T, H·m].
  absl::StatusOr<Tensor> QueryOrKey(const Context& ctx, const Tensor& x, const Tensor& w,
                                    const std::optional<Tensor>& conv, const char* window,
                                    const kernels::BatchLayout& layout, LayerState& state) const {
    MCSERVE_ASSIGN_OR_RETURN(Tensor projected, Project(ctx, x, w));
    if (!conv) {
      if (options_.conv_silu) MCSERVE_RETURN_IF_ERROR(Activate(ctx, projected, kernels::ActivationKind::kSilu));
      return projected;
    }
    MCSERVE_ASSIGN_OR_RETURN(Tensor y, NewF32(ctx, projected.shape()));
    MCSERVE_RETURN_IF_ERROR(kernels::ShortConv(ctx, {.x = &projected, .weight = &*conv, .silu = options_.conv_silu,
                                                     .layout = layout, .state = &state.at(window), .out = &y}));
    return y;
  }

  // o [T, H, d] → [RMSNorm_head(o)·o_norm] ⊙ GELU(g_proj x) → o_proj into out [T, hidden].
  absl::Status Output(const Context& ctx, const Tensor& x, Tensor& o, Tensor* out) const {
    const int64_t t = x.dim(0);
    if (o_norm_) {
      MCSERVE_ASSIGN_OR_RETURN(Tensor rows, o.Reshape({t * heads_, d_}));
      MCSERVE_RETURN_IF_ERROR(kernels::RmsNorm(ctx, {.x = &rows, .weight = &*o_norm_, .eps = eps_, .out = &rows}));
    }
    MCSERVE_ASSIGN_OR_RETURN(Tensor merged, o.Reshape({t, heads_ * d_}));  // [T, H·d]
    if (g_proj_) {
      MCSERVE_ASSIGN_OR_RETURN(Tensor g, Project(ctx, x, *g_proj_));  // [T, H·d]
      MCSERVE_RETURN_IF_ERROR(
          kernels::SwiGlu(ctx, {.gate = &g, .up = &merged, .out = &merged, .act = kernels::ActivationKind::kGelu}));
    }
    return kernels::Linear(ctx, {.x = &merged, .w = &o_proj_, .out = out});
  }

  int64_t heads_ = 0, m_ = 0, d_ = 0, conv_size_ = 0;
  LatticeConfig options_;
  float eps_ = 1e-6f;
  Tensor q_proj_, k_proj_;                 // [H·m, hidden] (the same qk_proj when shared)
  std::optional<Tensor> q_conv_, k_conv_;  // [H·m, 1, conv_size]
  Tensor v_proj_;                          // [H·d, hidden]
  Tensor b_proj_;                          // [H, hidden]: γ
  std::optional<Tensor> f_proj_;           // [H, hidden]: μ
  std::optional<Tensor> g_proj_;           // [H·d, hidden]
  std::optional<Tensor> o_norm_;           // [d]
  Tensor o_proj_;                          // [hidden, H·d]
  LatticeMemoryWeights memory_weights_;
  MemoryStage memory_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Mixer>> MakeLatticeMixer(const ModelConfig& c, const WeightBinder& w, int layer) {
  return LatticeMixer::Make(c, w, layer);
}

}  // namespace mcserve::engine
