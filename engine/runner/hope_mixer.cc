// HOPE's self-modifying Titans (docs/model-format.md, `hope`): the memory input x (head slices of the
// normed input u, or in_proj u), the static pre-query q_proj u (unless adaptive_q), the data momentum
// gate σ(beta_proj u); the per-token scan of every fast-weight memory (kernels/hope_memory: HopeMemory
// in one call without Memory Caching; with it, HopeFeatures for the other memories, convs and gates,
// then M_mem through MemoryStage and HopeRule); then RMSNorm_head(y)·o_norm ⊙ SiLU(g_proj u) (or
// without the gate) and o_proj.
#include <numeric>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/mc/hope_rule.h"
#include "engine/runner/hope_read_grad.h"
#include "engine/runner/mixer.h"
#include "engine/runner/mixer_ops.h"
#include "engine/runner/qkv_pipeline.h"
#include "kernels/hope_memory/hope_features.h"

namespace mcserve::engine {
namespace {

using kernels::Context;
using kernels::Tensor;

// The kernel's options from the config (docs/model-format.md, `hope`).
kernels::HopeMemoryOptions OptionsOf(const ModelConfig& c) {
  const HopeConfig& h = c.hope;
  kernels::HopeMemoryOptions o;
  o.head_dim = static_cast<int>(c.head_k_dim);
  o.expansion = static_cast<int>(h.memory_expansion);
  o.conv_size = static_cast<int>(c.conv_size);
  o.chunk_size_other = static_cast<int>(h.chunk_size_other);
  o.chunk_size_mem = static_cast<int>(h.chunk_size_mem);
  o.activation = h.memory_gelu ? kernels::HopeActivation::kGelu : kernels::HopeActivation::kSilu;
  o.eta_activation = h.eta_softplus ? kernels::HopeEtaActivation::kSoftplus : kernels::HopeEtaActivation::kSigmoid;
  o.eta_scale = static_cast<float>(h.eta_softplus ? h.eta_scale : h.eta_max);
  o.eta_clamp = h.eta_clamp;
  o.w1_rule = h.w1_dgd_hidden ? kernels::HopeW1Rule::kDgdHidden : kernels::HopeW1Rule::kRetention;
  o.read_after_write = h.read_after_write;
  o.read_anchor = h.readout_anchor;
  o.momentum = static_cast<kernels::HopeMomentum>(h.momentum);
  o.momentum_beta = static_cast<float>(h.momentum_beta);
  o.grad_scale = static_cast<float>(h.grad_scale);
  o.adaptive_q = h.adaptive_q;
  return o;
}

// The learned initial weights of memories `names` packed per head as the kernel keeps them: for each
// memory in order, W2 [E, d] (`.w2`, stored [H, E, d]) then W1 [o, E] (`.w1`, stored [H, o, E]).
// → [1, H, Σ params] F32 on the device.
absl::StatusOr<Tensor> PackInitial(const WeightBinder& w, const std::string& attn, const kernels::HopeMemoryOptions& o,
                                   int64_t heads, std::initializer_list<const char*> names) {
  const int64_t d = o.head_dim, e = o.expansion * d;
  std::vector<std::vector<float>> w2s, w1s;
  std::vector<int64_t> outs;
  for (const char* n : names) {
    const int64_t out = std::string_view(n) == "eta" || std::string_view(n) == "alpha" ? 1 : d;
    MCSERVE_ASSIGN_OR_RETURN(Tensor w2, w.Float(absl::StrCat(attn, "memory.", n, ".w2"), {heads, e, d}));
    MCSERVE_ASSIGN_OR_RETURN(Tensor w1, w.Float(absl::StrCat(attn, "memory.", n, ".w1"), {heads, out, e}));
    MCSERVE_ASSIGN_OR_RETURN(w2s.emplace_back(), w2.ToHostF32());
    MCSERVE_ASSIGN_OR_RETURN(w1s.emplace_back(), w1.ToHostF32());
    outs.push_back(out);
  }
  std::vector<float> packed;
  for (int64_t h = 0; h < heads; ++h) {
    for (size_t m = 0; m < outs.size(); ++m) {
      const auto w2 = w2s[m].begin() + h * e * d, w1 = w1s[m].begin() + h * outs[m] * e;
      packed.insert(packed.end(), w2, w2 + e * d);
      packed.insert(packed.end(), w1, w1 + outs[m] * e);
    }
  }
  return Tensor::FromHost(packed, {1, heads, static_cast<int64_t>(packed.size()) / heads}, w.device());
}

// R of the scalar memories: memory.{eta,alpha}.skip [H, d] stacked → [2, H, d].
absl::StatusOr<Tensor> PackSkip(const WeightBinder& w, const std::string& attn, int64_t heads, int64_t d) {
  std::vector<float> both;
  for (const char* n : {"eta", "alpha"}) {
    MCSERVE_ASSIGN_OR_RETURN(Tensor s, w.Float(absl::StrCat(attn, "memory.", n, ".skip"), {heads, d}));
    MCSERVE_ASSIGN_OR_RETURN(std::vector<float> host, s.ToHostF32());
    both.insert(both.end(), host.begin(), host.end());
  }
  return Tensor::FromHost(both, {2, heads, d}, w.device());
}

class HopeMixer : public Mixer {
 public:
  static absl::StatusOr<std::unique_ptr<Mixer>> Make(const ModelConfig& c, const WeightBinder& w, int layer) {
    auto mx = std::make_unique<HopeMixer>();
    const std::string attn = absl::StrCat("model.layers.", layer, ".attn.");
    const HopeConfig& h = c.hope;
    const int64_t hidden = c.hidden_size, heads = c.num_heads, d = c.head_k_dim;
    mx->heads_ = heads;
    mx->d_ = d;
    mx->eps_ = c.norm_eps;
    HopeMemoryWeights& mw = mx->memory_weights_;
    mw.options = OptionsOf(c);
    MCSERVE_RETURN_IF_ERROR(CheckMemoryCaching(c, layer));
    const bool caches = c.memory_caching && c.memory_caching->AppliesTo(layer);
    mw.soup = caches && c.memory_caching->aggregation == McAggregation::kSoup;
    mw.phase_period = std::lcm(h.chunk_size_other, h.chunk_size_mem);
    MCSERVE_ASSIGN_OR_RETURN(mw.initial_memory, PackInitial(w, attn, mw.options, heads, {"mem"}));
    MCSERVE_ASSIGN_OR_RETURN(mw.initial_fast,
                             h.adaptive_q ? PackInitial(w, attn, mw.options, heads, {"k", "v", "eta", "alpha", "q"})
                                          : PackInitial(w, attn, mw.options, heads, {"k", "v", "eta", "alpha"}));
    if (h.scalar_memory_skip) {
      MCSERVE_ASSIGN_OR_RETURN(mw.skip, PackSkip(w, attn, heads, d));
    }
    for (auto [name, conv] : {std::pair{"q", &mw.q_conv}, std::pair{"k", &mw.k_conv}, std::pair{"v", &mw.v_conv}}) {
      MCSERVE_ASSIGN_OR_RETURN(*conv, w.Float(absl::StrCat(attn, name, "_conv1d.weight"), {heads * d, 1, c.conv_size}));
    }
    if (h.memory_input_proj) {
      MCSERVE_ASSIGN_OR_RETURN(mx->in_proj_, w.Matrix(attn + "in_proj.weight", {heads * d, hidden}));
    }
    if (!h.adaptive_q) {
      MCSERVE_ASSIGN_OR_RETURN(mx->q_proj_, w.Matrix(attn + "q_proj.weight", {heads * d, hidden}));
    }
    if (h.momentum == HopeMomentumKind::kData) {
      MCSERVE_ASSIGN_OR_RETURN(mx->beta_proj_, w.Matrix(attn + "beta_proj.weight", {heads, hidden}));
    }
    if (h.output_gate) {
      MCSERVE_ASSIGN_OR_RETURN(mx->g_proj_, w.Matrix(attn + "g_proj.weight", {heads * d, hidden}));
    }
    MCSERVE_ASSIGN_OR_RETURN(mx->o_norm_, w.Float(attn + "o_norm.weight", {d}));
    MCSERVE_ASSIGN_OR_RETURN(mx->o_proj_, w.Matrix(attn + "o_proj.weight", {hidden, heads * d}));
    if (c.hope.AdaptiveCms()) {
      MCSERVE_ASSIGN_OR_RETURN(mx->grad_, HopeReadGrad::Bind(c, w, layer));
    }
    // M_mem is the stage's memory: a page is its [H, Pm] weights; its anchor and momentum are copied per
    // level by independent logarithmic MC.
    MCSERVE_ASSIGN_OR_RETURN(mx->memory_, MemoryStage::Bind(c, w, layer,
                                                            {.q_heads = heads, .k_heads = heads, .state_heads = heads,
                                                             .dk = d, .dv = d,
                                                             .mlp_params = kernels::HopeMemParams(mw.options),
                                                             .rule_states = HopeRule::MemStates(mw.options, heads)},
                                                            {}, /*normalized=*/false));
    return mx;
  }

  std::vector<StateSpec> StateSpecs() const override {
    std::vector<StateSpec> specs = HopeRule::StateSpecs(memory_weights_, heads_);
    memory_.AddStateSpecs(&specs);
    if (grad_) grad_->AddStateSpecs(&specs);
    return specs;
  }

  absl::Status BackwardToInput(const Context& ctx, const Tensor& x, const Tensor& dout, int slot, LayerState& state,
                               Tensor* dx) const override {
    if (!grad_) return Mixer::BackwardToInput(ctx, x, dout, slot, state, dx);
    return grad_->Backward(ctx, x, dout, slot, state, dx);
  }

  absl::Status Forward(const Context& ctx, const Tensor& x, const MixerBatch& batch, LayerState& state,
                       Tensor* out) const override {
    const int64_t t = x.dim(0);
    if (grad_ && t != static_cast<int64_t>(batch.slots.size())) {
      return absl::InternalError("hope: with an adaptive CMS the mixer runs one token per slot at a time");
    }
    std::optional<Tensor> projected;  // [T, H·d] in_proj x
    if (in_proj_) {
      MCSERVE_ASSIGN_OR_RETURN(projected, Project(ctx, x, *in_proj_));
    }
    MCSERVE_ASSIGN_OR_RETURN(Tensor xin, (projected ? *projected : x).Reshape({t, heads_, d_}));  // [T, H, d]
    std::optional<Tensor> q_pre;  // [T, H, d]
    if (q_proj_) {
      MCSERVE_ASSIGN_OR_RETURN(Tensor q, Project(ctx, x, *q_proj_));
      MCSERVE_ASSIGN_OR_RETURN(q_pre, q.Reshape({t, heads_, d_}));
    }
    std::optional<Tensor> beta;  // [T, H]
    if (beta_proj_) {
      MCSERVE_ASSIGN_OR_RETURN(beta, SigmoidGate(ctx, x, *beta_proj_));
    }
    // A sequence at position 0 starts from the learned initial fast weights.
    for (size_t i = 0; i < batch.slots.size(); ++i) {
      if (batch.positions[i] != 0) continue;
      MCSERVE_RETURN_IF_ERROR(HopeRule::RestartFast(memory_weights_, batch.slots[i], state));
    }
    MCSERVE_ASSIGN_OR_RETURN(Tensor y, NewF32(ctx, {t, heads_, d_}));  // [T, H, d]
    const Scan scan{.x = &xin, .q_pre = q_pre ? &*q_pre : nullptr, .beta = beta ? &*beta : nullptr};
    MCSERVE_RETURN_IF_ERROR(memory_.caches() ? ScanCaching(ctx, x, scan, batch, state, &y)
                                             : ScanWhole(ctx, scan, batch, state, &y));
    std::optional<Tensor> gate;  // [T, H·d]
    if (g_proj_) {
      MCSERVE_ASSIGN_OR_RETURN(gate, Project(ctx, x, *g_proj_));
    }
    return OutputStage(ctx, y, o_norm_, gate ? &*gate : nullptr, eps_, o_proj_, out);
  }

 private:
  // One pass's inputs of the scan.
  struct Scan {
    const Tensor* x;      // [T, H, d] memory input
    const Tensor* q_pre;  // [T, H, d] or null (adaptive_q)
    const Tensor* beta;   // [T, H] or null (unless momentum data)
  };

  // Rejects what Memory Caching on hope does not define (docs/memory-caching.md).
  static absl::Status CheckMemoryCaching(const ModelConfig& c, int layer) {
    if (!c.memory_caching || !c.memory_caching->AppliesTo(layer)) return absl::OkStatus();
    const McConfig& mc = *c.memory_caching;
    if (c.hope.cms_adaptive) {
      return absl::UnimplementedError(absl::StrCat(
          "layer ", layer, ": hope: Memory Caching is not defined with \"cms_adaptive\": true"));
    }
    if (mc.aggregation == McAggregation::kSoup && mc.segmentation == McSegmentation::kLogarithmic &&
        mc.init_mode == McInitMode::kIndependent) {
      return absl::UnimplementedError(absl::StrCat(
          "layer ", layer, ": hope: Memory Caching with soup, logarithmic segmentation and independent init "
                           "mode is not supported (the soup would need the online block's per-level weights)"));
    }
    return absl::OkStatus();
  }

  // Positions of each sequence's first row modulo lcm(C_o, C_mem) [B] I32: the anchors' phase.
  absl::StatusOr<Tensor> Phase(const Context& ctx, const MixerBatch& batch) const {
    RowList phase(batch.positions.size());
    for (size_t i = 0; i < phase.size(); ++i) {
      phase[i] = static_cast<int32_t>(batch.positions[i] % memory_weights_.phase_period);
    }
    return Tensor::FromHostI32(phase, {static_cast<int64_t>(phase.size())}, ctx.device);
  }

  // Without Memory Caching: the whole scan in one call (HopeMemory). y [T, H, d].
  absl::Status ScanWhole(const Context& ctx, const Scan& in, const MixerBatch& batch, LayerState& state,
                         Tensor* y) const {
    const HopeMemoryWeights& w = memory_weights_;
    MCSERVE_ASSIGN_OR_RETURN(Tensor phase, Phase(ctx, batch));
    for (size_t i = 0; i < batch.slots.size(); ++i) {  // a request's start: M_mem from its initial weights
      if (batch.positions[i] == 0) MCSERVE_RETURN_IF_ERROR(HopeRule::RestartMem(w, batch.slots[i], state));
    }
    kernels::HopeMemoryArgs a{.options = w.options, .x = in.x, .q_pre = in.q_pre, .beta = in.beta,
                              .skip = w.skip ? &*w.skip : nullptr, .q_conv = &w.q_conv, .k_conv = &w.k_conv,
                              .v_conv = &w.v_conv, .phase = &phase, .layout = batch.layout,
                              .memory = &state.at("memory"), .mem_anchor = &state.at("mem_anchor"),
                              .fast = &state.at("fast"), .fast_anchor = &state.at("fast_anchor")};
    if (HasMomentum()) {
      a.momentum = &state.at("momentum");
      a.fast_momentum = &state.at("fast_momentum");
    }
    SetConvWindows(state, a.conv_q, a.conv_k, a.conv_v);
    a.out = y;
    if (grad_) MCSERVE_RETURN_IF_ERROR(grad_->SaveBeforeScan(batch, state));
    MCSERVE_RETURN_IF_ERROR(kernels::HopeMemory(ctx, a));
    return grad_ ? grad_->SaveAfterScan(batch, state) : absl::OkStatus();
  }

  // With Memory Caching: HopeFeatures over the batch, then M_mem through the stage. y [T, H, d].
  absl::Status ScanCaching(const Context& ctx, const Tensor& x, const Scan& in, const MixerBatch& batch,
                           LayerState& state, Tensor* y) const {
    const HopeMemoryWeights& w = memory_weights_;
    const int64_t t = in.x->dim(0);
    MCSERVE_ASSIGN_OR_RETURN(Tensor phase, Phase(ctx, batch));
    MCSERVE_ASSIGN_OR_RETURN(Tensor q, NewF32(ctx, {t, heads_, d_}));   // [T, H, d]
    MCSERVE_ASSIGN_OR_RETURN(Tensor k, NewF32(ctx, {t, heads_, d_}));   // [T, H, d]
    MCSERVE_ASSIGN_OR_RETURN(Tensor v, NewF32(ctx, {t, heads_, d_}));   // [T, H, d]
    MCSERVE_ASSIGN_OR_RETURN(Tensor alpha, NewF32(ctx, {t, heads_}));   // [T, H]
    MCSERVE_ASSIGN_OR_RETURN(Tensor eta, NewF32(ctx, {t, heads_}));     // [T, H]
    kernels::HopeFeaturesArgs f{.options = w.options, .x = in.x, .q_pre = in.q_pre, .beta = in.beta,
                                .skip = w.skip ? &*w.skip : nullptr, .q_conv = &w.q_conv, .k_conv = &w.k_conv,
                                .v_conv = &w.v_conv, .phase = &phase, .layout = batch.layout,
                                .fast = &state.at("fast"), .fast_anchor = &state.at("fast_anchor"),
                                .fast_momentum = HasMomentum() ? &state.at("fast_momentum") : nullptr};
    SetConvWindows(state, f.conv_q, f.conv_k, f.conv_v);
    f.q = &q;
    f.k = &k;
    f.v = &v;
    f.alpha = &alpha;
    f.eta = &eta;
    MCSERVE_RETURN_IF_ERROR(kernels::HopeFeatures(ctx, f));
    absl::InlinedVector<int64_t, 64> row_positions(t);  // [T] tokens of the request before each row
    for (size_t b = 0; b < batch.slots.size(); ++b) {
      for (int32_t r = batch.cu[b]; r < batch.cu[b + 1]; ++r) row_positions[r] = batch.positions[b] + (r - batch.cu[b]);
    }
    const HopeRule rule(w, {.q = &q, .k = &k, .v = &v, .alpha = &alpha, .eta = &eta, .beta = in.beta,
                            .row_positions = row_positions});
    for (size_t i = 0; i < batch.slots.size(); ++i) {  // a request's start: M_mem from its initial weights
      if (batch.positions[i] == 0) MCSERVE_RETURN_IF_ERROR(HopeRule::RestartMem(w, batch.slots[i], state));
    }
    return memory_.Run(ctx, x, rule, batch, state, y);
  }

  bool HasMomentum() const { return memory_weights_.options.momentum != kernels::HopeMomentum::kNone; }

  // The conv windows (null when conv_size is 1).
  void SetConvWindows(LayerState& state, Tensor*& q, Tensor*& k, Tensor*& v) const {
    if (memory_weights_.options.conv_size <= 1) return;
    q = &state.at("conv_q");
    k = &state.at("conv_k");
    v = &state.at("conv_v");
  }

  int64_t heads_ = 0, d_ = 0;
  float eps_ = 1e-6f;
  std::optional<Tensor> in_proj_;    // [H·d, hidden] (memory_input proj)
  std::optional<Tensor> q_proj_;     // [H·d, hidden] (unless adaptive_q)
  std::optional<Tensor> beta_proj_;  // [H, hidden] (momentum data)
  std::optional<Tensor> g_proj_;     // [H·d, hidden] (output_gate rmsnorm_silu_gate)
  Tensor o_norm_;                    // [d]
  Tensor o_proj_;                    // [hidden, H·d]
  HopeMemoryWeights memory_weights_;
  MemoryStage memory_;
  std::optional<HopeReadGrad> grad_;  // the gradient path (adaptive CMS only)
};

}  // namespace

absl::StatusOr<std::unique_ptr<Mixer>> MakeHopeMixer(const ModelConfig& c, const WeightBinder& w, int layer) {
  return HopeMixer::Make(c, w, layer);
}

}  // namespace mcserve::engine
