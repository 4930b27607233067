// Deep (MLP) memories: dla and titans with memory_depth 2 (docs/model-format.md). The titans token
// pipeline (q, k, v projections with short convs, SiLU, per-head L2 norm; q not scaled: the MLP is
// read at unit-norm queries) around a per-head memory M(x) = x + [LN](W1 GELU(W2 x)) trained online
// by kernels/deep_memory, read after each token's write, then the gated output stage.
#include "absl/strings/str_cat.h"
#include "engine/runner/mixer.h"
#include "engine/runner/qkv_pipeline.h"
#include "kernels/core/status_macros.h"
#include "kernels/deep_memory/deep_memory.h"

namespace mcserve::engine {
namespace {

using kernels::Context;
using kernels::Tensor;

// The learned initial weights `<attn>memory.w1` [H, d, e] and `memory.w2` [H, e, d] packed per head
// as the kernel's state layout: W2 row-major, then W1 row-major → [1, H, 2·e·d] on the device.
absl::StatusOr<Tensor> PackInitialMemory(const WeightBinder& w, const std::string& attn, int64_t heads, int64_t d,
                                         int64_t e, kernels::Device device) {
  MCSERVE_ASSIGN_OR_RETURN(Tensor w1, w.Float(attn + "memory.w1", {heads, d, e}));
  MCSERVE_ASSIGN_OR_RETURN(Tensor w2, w.Float(attn + "memory.w2", {heads, e, d}));
  MCSERVE_ASSIGN_OR_RETURN(std::vector<float> h1, w1.ToHostF32());
  MCSERVE_ASSIGN_OR_RETURN(std::vector<float> h2, w2.ToHostF32());
  const int64_t per = e * d;
  std::vector<float> packed;
  packed.reserve(static_cast<size_t>(heads * 2 * per));
  for (int64_t h = 0; h < heads; ++h) {
    packed.insert(packed.end(), h2.begin() + h * per, h2.begin() + (h + 1) * per);
    packed.insert(packed.end(), h1.begin() + h * per, h1.begin() + (h + 1) * per);
  }
  return Tensor::FromHost(packed, {1, heads, 2 * per}, device);
}

// `<attn>memory.ln.<name>` [d], shared by the heads, as the kernel's [H, d].
absl::StatusOr<Tensor> PerHead(const WeightBinder& w, const std::string& name, int64_t heads, int64_t d,
                               kernels::Device device) {
  MCSERVE_ASSIGN_OR_RETURN(Tensor v, w.Float(name, {d}));
  MCSERVE_ASSIGN_OR_RETURN(std::vector<float> host, v.ToHostF32());
  std::vector<float> rows;
  for (int64_t h = 0; h < heads; ++h) rows.insert(rows.end(), host.begin(), host.end());
  return Tensor::FromHost(rows, {heads, d}, device);
}

class DeepMemoryMixer : public Mixer {
 public:
  static absl::StatusOr<std::unique_ptr<Mixer>> Make(const ModelConfig& c, const WeightBinder& w, int layer) {
    if (c.memory_caching && c.memory_caching->AppliesTo(layer)) {
      return absl::UnimplementedError(absl::StrCat(
          "layer ", layer, ": Memory Caching on deep (MLP) memories is not supported yet (", c.model_type, ")"));
    }
    auto m = std::make_unique<DeepMemoryMixer>();
    m->titans_ = c.family == ModelFamily::kTitans;
    m->heads_ = c.num_heads;
    m->d_ = c.head_k_dim;
    m->expansion_ = c.memory_expansion;
    m->inner_chunk_ = c.inner_chunk_size;
    m->ln_eps_ = c.norm_eps;
    const std::string attn = absl::StrCat("model.layers.", layer, ".attn.");
    const kernels::Device device = w.device();
    QkvOptions dims = EqualHeadOptions(c);
    dims.scale_q = false;
    MCSERVE_ASSIGN_OR_RETURN(m->qkv_, QkvPipeline::Bind(w, attn, c.hidden_size, dims));
    MCSERVE_ASSIGN_OR_RETURN(m->output_, GatedOutput::Bind(w, attn, c.hidden_size, c.num_heads, c.head_v_dim,
                                                           c.use_gate, c.norm_eps, "o_norm"));
    MCSERVE_ASSIGN_OR_RETURN(m->b_proj_, w.Matrix(attn + "b_proj.weight", {c.num_heads, c.hidden_size}));
    if (m->titans_) {
      MCSERVE_ASSIGN_OR_RETURN(m->a_proj_, w.Matrix(attn + "a_proj.weight", {c.num_heads, c.hidden_size}));
      MCSERVE_ASSIGN_OR_RETURN(m->m_proj_, w.Matrix(attn + "m_proj.weight", {c.num_heads, c.hidden_size}));
    }
    MCSERVE_ASSIGN_OR_RETURN(m->initial_, PackInitialMemory(w, attn, m->heads_, m->d_, m->expansion_ * m->d_, device));
    if (c.memory_layer_norm) {
      MCSERVE_ASSIGN_OR_RETURN(m->ln_weight_, PerHead(w, attn + "memory.ln.weight", m->heads_, m->d_, device));
      MCSERVE_ASSIGN_OR_RETURN(m->ln_bias_, PerHead(w, attn + "memory.ln.bias", m->heads_, m->d_, device));
    }
    return m;
  }

  std::vector<StateSpec> StateSpecs() const override {
    const int64_t p = 2 * expansion_ * d_ * d_;
    std::vector<StateSpec> specs = {{"memory", {heads_, p}}};
    if (titans_) specs.push_back({"momentum", {heads_, p}});
    if (inner_chunk_ > 1) specs.push_back({"anchor", {heads_, p}});
    qkv_.AddStateSpecs(&specs);
    return specs;
  }

  absl::Status Forward(const Context& ctx, const Tensor& x, const MixerBatch& batch, LayerState& state,
                       Tensor* out) const override {
    MCSERVE_ASSIGN_OR_RETURN(QkvPipeline::Qkv qkv, qkv_.Run(ctx, x, batch.layout, state));
    MCSERVE_ASSIGN_OR_RETURN(Tensor step, SigmoidGate(ctx, x, b_proj_));
    std::optional<Tensor> retention, momentum_gate;
    if (titans_) {
      MCSERVE_ASSIGN_OR_RETURN(retention, SigmoidGate(ctx, x, *a_proj_));
      MCSERVE_ASSIGN_OR_RETURN(momentum_gate, SigmoidGate(ctx, x, *m_proj_));
    }
    MCSERVE_RETURN_IF_ERROR(StartFreshSequences(batch, state));
    // Without Memory Caching, inner chunks run every b tokens from the sequence start.
    std::vector<int32_t> offsets(batch.slots.size());
    for (size_t i = 0; i < offsets.size(); ++i) offsets[i] = static_cast<int32_t>(batch.positions[i] % inner_chunk_);
    MCSERVE_ASSIGN_OR_RETURN(Tensor inner_offset,
                             Tensor::FromHostI32(offsets, {static_cast<int64_t>(offsets.size())}, ctx.device));
    MCSERVE_ASSIGN_OR_RETURN(Tensor o, NewF32(ctx, {x.dim(0), heads_, d_}));
    MCSERVE_RETURN_IF_ERROR(kernels::DeepMemory(
        ctx, {.rule = titans_ ? kernels::DeepMemoryRule::kTitans : kernels::DeepMemoryRule::kDla,
              .expansion = static_cast<int>(expansion_),
              .inner_chunk_size = static_cast<int>(inner_chunk_),
              .ln_eps = ln_eps_,
              .q = &qkv.q,
              .k = &qkv.k,
              .v = &qkv.v,
              .step = &step,
              .retention = retention ? &*retention : nullptr,
              .momentum_gate = momentum_gate ? &*momentum_gate : nullptr,
              .ln_weight = ln_weight_ ? &*ln_weight_ : nullptr,
              .ln_bias = ln_bias_ ? &*ln_bias_ : nullptr,
              .inner_offset = &inner_offset,
              .layout = batch.layout,
              .memory = &state.at("memory"),
              .momentum = titans_ ? &state.at("momentum") : nullptr,
              .anchor = inner_chunk_ > 1 ? &state.at("anchor") : nullptr,
              .out = &o}));
    return output_.Run(ctx, x, o, out);
  }

 private:
  // A sequence at position 0 starts from the learned initial weights (slots are zeroed on reset;
  // momentum starts at zero, and the first token sets the anchor).
  absl::Status StartFreshSequences(const MixerBatch& batch, LayerState& state) const {
    Tensor& memory = state.at("memory");
    for (size_t i = 0; i < batch.slots.size(); ++i) {
      if (batch.positions[i] != 0) continue;
      Tensor row = memory.Rows(batch.slots[i], batch.slots[i] + 1);
      MCSERVE_RETURN_IF_ERROR(row.CopyFrom(initial_));
    }
    return absl::OkStatus();
  }

  bool titans_ = false;
  int64_t heads_ = 0, d_ = 0, expansion_ = 4, inner_chunk_ = 1;
  float ln_eps_ = 1e-6f;
  QkvPipeline qkv_;
  GatedOutput output_;
  Tensor b_proj_;                              // [heads, H]: step size η (sigmoid)
  std::optional<Tensor> a_proj_, m_proj_;      // titans: [heads, H] retention α, momentum β (sigmoid)
  Tensor initial_;                             // [1, heads, 2·e·d] learned initial weights θ_0
  std::optional<Tensor> ln_weight_, ln_bias_;  // memory_layer_norm: [heads, d] (the [d] weights per head)
};

}  // namespace

absl::StatusOr<std::unique_ptr<Mixer>> MakeDeepMemoryMixer(const ModelConfig& c, const WeightBinder& w, int layer) {
  return DeepMemoryMixer::Make(c, w, layer);
}

}  // namespace mcserve::engine
