// Deep (MLP) memories: dla and titans with memory_depth 2 (docs/model-format.md). The titans token
// pipeline (q, k, v projections with short convs, SiLU, per-head L2 norm; q not scaled: the MLP is
// read at unit-norm queries) around a per-head memory M(x) = x + [LN](W1 GELU(W2 x)) trained online
// by kernels/deep_memory, read after each token's write (with Memory Caching through MemoryStage and
// DeepRule), then the gated output stage.
#include "absl/strings/str_cat.h"
#include "engine/mc/deep_rule.h"
#include "engine/runner/mixer.h"
#include "engine/runner/qkv_pipeline.h"
#include "base/status_macros.h"
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
    auto m = std::make_unique<DeepMemoryMixer>();
    DeepMemoryWeights& mw = m->weights_;
    mw.rule = c.family == ModelFamily::kTitans ? kernels::DeepMemoryRule::kTitans : kernels::DeepMemoryRule::kDla;
    mw.heads = c.num_heads;
    mw.d = c.head_k_dim;
    mw.expansion = c.memory_expansion;
    mw.inner_chunk = c.inner_chunk_size;
    mw.ln_eps = c.norm_eps;
    const std::string attn = absl::StrCat("model.layers.", layer, ".attn.");
    QkvOptions dims = EqualHeadOptions(c);
    dims.scale_q = false;
    MCSERVE_ASSIGN_OR_RETURN(m->qkv_, QkvPipeline::Bind(w, attn, c.hidden_size, dims));
    MCSERVE_ASSIGN_OR_RETURN(m->memory_, MemoryStage::Bind(c, w, layer,
                                                           {.q_heads = mw.heads, .k_heads = mw.heads,
                                                            .state_heads = mw.heads, .dk = mw.d, .dv = mw.d,
                                                            .mlp_params = m->Params(), .rule_states = m->RuleStates()},
                                                           {}, /*normalized=*/false));
    if (m->memory_.caches() && c.memory_caching->segmentation == McSegmentation::kConstant) {
      mw.segment_size = c.memory_caching->segment_size;
    }
    MCSERVE_ASSIGN_OR_RETURN(m->output_, GatedOutput::Bind(w, attn, c.hidden_size, c.num_heads, c.head_v_dim,
                                                           c.use_gate, c.norm_eps, "o_norm"));
    MCSERVE_ASSIGN_OR_RETURN(m->b_proj_, w.Matrix(attn + "b_proj.weight", {c.num_heads, c.hidden_size}));
    if (mw.rule == kernels::DeepMemoryRule::kTitans) {
      MCSERVE_ASSIGN_OR_RETURN(m->a_proj_, w.Matrix(attn + "a_proj.weight", {c.num_heads, c.hidden_size}));
      MCSERVE_ASSIGN_OR_RETURN(m->m_proj_, w.Matrix(attn + "m_proj.weight", {c.num_heads, c.hidden_size}));
    }
    MCSERVE_ASSIGN_OR_RETURN(mw.initial, PackInitialMemory(w, attn, mw.heads, mw.d, mw.expansion * mw.d, w.device()));
    if (c.memory_layer_norm) {
      MCSERVE_ASSIGN_OR_RETURN(mw.ln_weight, PerHead(w, attn + "memory.ln.weight", mw.heads, mw.d, w.device()));
      MCSERVE_ASSIGN_OR_RETURN(mw.ln_bias, PerHead(w, attn + "memory.ln.bias", mw.heads, mw.d, w.device()));
    }
    return m;
  }

  std::vector<StateSpec> StateSpecs() const override {
    std::vector<StateSpec> specs = {{"memory", {weights_.heads, Params()}}};
    for (const StateSpec& s : RuleStates()) specs.push_back(s);
    qkv_.AddStateSpecs(&specs);
    memory_.AddStateSpecs(&specs);
    return specs;
  }

  // P, the weights of one head's memory.
  int64_t Params() const { return 2 * weights_.expansion * weights_.d * weights_.d; }
  // The memory's state besides its weights: Titans' momentum, the inner-chunk anchor (b > 1).
  std::vector<StateSpec> RuleStates() const {
    std::vector<StateSpec> states;
    if (weights_.rule == kernels::DeepMemoryRule::kTitans) states.push_back({"momentum", {weights_.heads, Params()}});
    if (weights_.inner_chunk > 1) states.push_back({"anchor", {weights_.heads, Params()}});
    return states;
  }

  absl::Status Forward(const Context& ctx, const Tensor& x, const MixerBatch& batch, LayerState& state,
                       Tensor* out) const override {
    // One grouped GEMM: q, k, v, b_proj, then a_proj and m_proj (titans), then the output gate.
    kernels::TensorPtrList gates = {&b_proj_};
    if (a_proj_) gates.insert(gates.end(), {&*a_proj_, &*m_proj_});
    const Tensor* g_proj = output_.gate_weight();
    if (g_proj != nullptr) gates.push_back(g_proj);
    MCSERVE_ASSIGN_OR_RETURN(QkvPipeline::Qkv qkv, qkv_.Run(ctx, x, batch.layout, state, gates));
    MCSERVE_ASSIGN_OR_RETURN(Tensor step, SigmoidGate(ctx, std::move(qkv.extra[0])));
    std::optional<Tensor> retention, momentum_gate;
    if (a_proj_) {
      MCSERVE_ASSIGN_OR_RETURN(retention, SigmoidGate(ctx, std::move(qkv.extra[1])));
      MCSERVE_ASSIGN_OR_RETURN(momentum_gate, SigmoidGate(ctx, std::move(qkv.extra[2])));
    }
    const Tensor* gate = g_proj != nullptr ? &qkv.extra.back() : nullptr;  // [T, heads·d]
    const DeepRule rule(weights_, {.q = &qkv.q,
                                   .k = &qkv.k,
                                   .v = &qkv.v,
                                   .step = &step,
                                   .retention = retention ? &*retention : nullptr,
                                   .momentum_gate = momentum_gate ? &*momentum_gate : nullptr});
    // A sequence at position 0 starts from the learned initial weights (slots are zeroed on reset).
    for (size_t i = 0; i < batch.slots.size(); ++i) {
      if (batch.positions[i] == 0) MCSERVE_RETURN_IF_ERROR(rule.Restart(ctx, batch.slots[i], state));
    }
    MCSERVE_ASSIGN_OR_RETURN(Tensor o, NewF32(ctx, {x.dim(0), weights_.heads, weights_.d}));
    MCSERVE_RETURN_IF_ERROR(memory_.Run(ctx, x, rule, batch, state, &o));
    return output_.RunProjected(ctx, gate, o, out);
  }

 private:
  DeepMemoryWeights weights_;
  QkvPipeline qkv_;
  MemoryStage memory_;
  GatedOutput output_;
  Tensor b_proj_;                          // [heads, H]: step size η (sigmoid)
  std::optional<Tensor> a_proj_, m_proj_;  // titans: [heads, H] retention α, momentum β (sigmoid)
};

}  // namespace

absl::StatusOr<std::unique_ptr<Mixer>> MakeDeepMemoryMixer(const ModelConfig& c, const WeightBinder& w, int layer) {
  return DeepMemoryMixer::Make(c, w, layer);
}

}  // namespace mcserve::engine
