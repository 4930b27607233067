#include "engine/runner/qkv_pipeline.h"

#include <array>
#include <atomic>
#include <optional>
#include <span>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/mc/linear_rule.h"

namespace mcserve::engine {

using kernels::ActivationKind;
using kernels::Context;
using kernels::Tensor;

QkvOptions EqualHeadOptions(const ModelConfig& c) {
  return {.q_heads = c.num_heads, .v_heads = c.num_heads, .dk = c.head_k_dim, .dv = c.head_v_dim,
          .use_conv = c.use_short_conv, .conv_size = c.conv_size};
}

absl::StatusOr<QkvPipeline> QkvPipeline::Bind(const WeightBinder& w, const std::string& attn, int64_t hidden,
                                              const QkvOptions& o) {
  QkvPipeline p;
  p.options_ = o;
  const int64_t key_dim = o.q_heads * o.dk, value_dim = o.v_heads * o.dv;
  MCSERVE_ASSIGN_OR_RETURN(p.q_, ConvProjection::Bind(w, attn, "q", key_dim, hidden, o.use_conv, o.conv_size));
  MCSERVE_ASSIGN_OR_RETURN(p.k_, ConvProjection::Bind(w, attn, "k", key_dim, hidden, o.use_conv, o.conv_size));
  MCSERVE_ASSIGN_OR_RETURN(p.v_, ConvProjection::Bind(w, attn, "v", value_dim, hidden, o.use_conv, o.conv_size));
  // Without a conv, only SiLU is applied before the head split (fla); other activations come after.
  const ActivationKind qk_pre = o.qk_act == ActivationKind::kSilu ? ActivationKind::kSilu : ActivationKind::kIdentity;
  p.q_.act_without_conv = p.k_.act_without_conv = qk_pre;
  p.v_.act_without_conv = ActivationKind::kSilu;
  return p;
}

void QkvPipeline::AddStateSpecs(std::vector<StateSpec>* specs) const {
  for (const ConvProjection* p : {&q_, &k_, &v_}) p->AddStateSpec(options_.conv_size, specs);
}

absl::StatusOr<Tensor> QkvPipeline::RunQk(const Context& ctx, const ConvProjection& p, Tensor projected,
                                          const kernels::BatchLayout& layout, LayerState& state) const {
  const bool silu = options_.qk_act == ActivationKind::kSilu;
  MCSERVE_ASSIGN_OR_RETURN(Tensor y, p.RunProjected(ctx, std::move(projected), layout, state, /*conv_silu=*/silu));
  if (!silu && options_.qk_act != ActivationKind::kIdentity) {
    MCSERVE_RETURN_IF_ERROR(Activate(ctx, y, options_.qk_act));
  }
  return y;
}

absl::StatusOr<QkvPipeline::Qkv> QkvPipeline::Run(const Context& ctx, const Tensor& x,
                                                  const kernels::BatchLayout& layout, LayerState& state,
                                                  std::span<const Tensor* const> extra) const {
  const QkvOptions& o = options_;
  const int64_t t = x.dim(0);
  MCSERVE_ASSIGN_OR_RETURN(kernels::TensorList projected, Project(ctx, x, extra));
  MCSERVE_ASSIGN_OR_RETURN(Tensor q, RunQk(ctx, q_, std::move(projected[0]), layout, state));
  MCSERVE_ASSIGN_OR_RETURN(Tensor k, RunQk(ctx, k_, std::move(projected[1]), layout, state));
  MCSERVE_ASSIGN_OR_RETURN(Tensor v, v_.RunProjected(ctx, std::move(projected[2]), layout, state));
  const float eps = o.qk_l2 ? kL2Eps : 0.0f;
  MCSERVE_RETURN_IF_ERROR(NormalizeRows(ctx, q, o.dk, o.qk_l2, eps, query_scale()));
  MCSERVE_RETURN_IF_ERROR(NormalizeRows(ctx, k, o.dk, o.qk_l2, eps, 1.0f));
  Qkv out;
  MCSERVE_ASSIGN_OR_RETURN(out.q, q.Reshape({t, o.q_heads, o.dk}));
  MCSERVE_ASSIGN_OR_RETURN(out.k, k.Reshape({t, o.q_heads, o.dk}));
  MCSERVE_ASSIGN_OR_RETURN(out.v, v.Reshape({t, o.v_heads, o.dv}));
  out.extra.assign(std::make_move_iterator(projected.begin() + 3), std::make_move_iterator(projected.end()));
  return out;
}

absl::StatusOr<kernels::TensorList> QkvPipeline::Project(const Context& ctx, const Tensor& x,
                                                        std::span<const Tensor* const> extra) const {
  kernels::TensorPtrList weights = {&q_.w, &k_.w, &v_.w};
  weights.insert(weights.end(), extra.begin(), extra.end());
  return ProjectMany(ctx, x, weights);
}

bool QkvPipeline::FusesDecode() const {
  const QkvOptions& o = options_;
  return o.use_conv && q_.taps && k_.taps && v_.taps && o.qk_act == ActivationKind::kSilu && o.qk_l2 &&
         o.q_heads == o.v_heads && o.dk % 8 == 0 && o.dv % 8 == 0;
}

void QkvPipeline::SetDecodeConvs(std::span<const Tensor> projected, std::span<Tensor, 3> rows,
                                 const kernels::BatchLayout& layout, LayerState& state,
                                 kernels::DeltaDecodeArgs* args) const {
  const ConvProjection* convs[3] = {&q_, &k_, &v_};
  for (int i = 0; i < 3; ++i) {
    const ConvProjection& p = *convs[i];
    args->conv[i] = {.x = &projected[i], .weight = &*p.conv, .silu = true, .layout = layout,
                     .state = &state.at(p.state_name), .out = &rows[i]};
    args->taps[i] = &*p.taps;
  }
  args->q_scale = query_scale();
  args->norm_eps = kL2Eps;
}

absl::StatusOr<GatedOutput> GatedOutput::Bind(const WeightBinder& w, const std::string& attn, int64_t hidden,
                                              int64_t heads, int64_t dv, bool use_gate, float eps,
                                              const std::string& norm_name) {
  GatedOutput g;
  g.eps_ = eps;
  if (use_gate) {
    MCSERVE_ASSIGN_OR_RETURN(Tensor gp, w.Matrix(attn + "g_proj.weight", {heads * dv, hidden}));
    g.g_proj_ = std::move(gp);
  }
  MCSERVE_ASSIGN_OR_RETURN(g.norm_, w.Float(attn + norm_name + ".weight", {dv}));
  MCSERVE_ASSIGN_OR_RETURN(g.o_proj_, w.Matrix(attn + "o_proj.weight", {hidden, heads * dv}));
  return g;
}

absl::Status GatedOutput::Run(const Context& ctx, const Tensor& x, Tensor& o, Tensor* out) const {
  std::optional<Tensor> gate;
  if (g_proj_) {
    MCSERVE_ASSIGN_OR_RETURN(gate, Project(ctx, x, *g_proj_));
  }
  return RunProjected(ctx, gate ? &*gate : nullptr, o, out);
}

absl::Status GatedOutput::RunProjected(const Context& ctx, const Tensor* gate, Tensor& o, Tensor* out) const {
  return OutputStage(ctx, o, norm_, gate, eps_, o_proj_, out);
}

absl::StatusOr<DeltaStyleCore> DeltaStyleCore::Bind(const ModelConfig& c, const WeightBinder& w, int layer,
                                                    const QkvOptions& dims, MemoryStage::Aux aux) {
  DeltaStyleCore core;
  core.attn = absl::StrCat("model.layers.", layer, ".attn.");
  core.dims = dims;
  MCSERVE_ASSIGN_OR_RETURN(core.qkv, QkvPipeline::Bind(w, core.attn, c.hidden_size, dims));
  MCSERVE_ASSIGN_OR_RETURN(core.memory, MemoryStage::Bind(c, w, layer,
                                                          {.q_heads = dims.q_heads, .k_heads = dims.q_heads,
                                                           .state_heads = dims.v_heads, .dk = dims.dk, .dv = dims.dv},
                                                          std::move(aux), /*normalized=*/false));
  MCSERVE_ASSIGN_OR_RETURN(core.output, GatedOutput::Bind(w, core.attn, c.hidden_size, dims.v_heads, dims.dv,
                                                          c.use_gate, c.norm_eps, "o_norm"));
  return core;
}

std::vector<StateSpec> DeltaStyleCore::StateSpecs(std::vector<StateSpec> extra) const {
  std::vector<StateSpec> specs = {{"memory", {dims.v_heads, dims.dk, dims.dv}}};
  specs.insert(specs.end(), extra.begin(), extra.end());
  qkv.AddStateSpecs(&specs);
  memory.AddStateSpecs(&specs);
  return specs;
}

absl::StatusOr<DeltaStyleCore::Inputs> DeltaStyleCore::Project(const Context& ctx, const Tensor& x,
                                                               const MixerBatch& batch, LayerState& state,
                                                               kernels::TensorPtrList gates) const {
  const Tensor* g_proj = output.gate_weight();
  if (g_proj != nullptr) gates.push_back(g_proj);
  Inputs in;
  MCSERVE_ASSIGN_OR_RETURN(in.qkv, qkv.Run(ctx, x, batch.layout, state, gates));
  if (g_proj != nullptr) {
    in.gate = std::move(in.qkv.extra.back());
    in.qkv.extra.pop_back();
  }
  return in;
}

absl::Status DeltaStyleCore::Finish(const Context& ctx, const Tensor& x, const Inputs& inputs, const MemoryRule& rule,
                                    const MixerBatch& batch, LayerState& state, Tensor* out) const {
  MCSERVE_ASSIGN_OR_RETURN(Tensor o, NewF32(ctx, {x.dim(0), dims.v_heads, dims.dv}));
  MCSERVE_RETURN_IF_ERROR(memory.Run(ctx, x, rule, batch, state, &o));
  return output.RunProjected(ctx, inputs.gate ? &*inputs.gate : nullptr, o, out);
}

namespace {
std::atomic<bool> decode_fusion_off{false};
std::atomic<uint64_t> fused_decode_steps{0};
}  // namespace

uint64_t FusedDecodeStepsForTesting() { return fused_decode_steps.load(std::memory_order_relaxed); }

void SetDecodeFusionOffForTesting(bool off) { decode_fusion_off.store(off, std::memory_order_relaxed); }
bool DecodeFusionOffForTesting() { return decode_fusion_off.load(std::memory_order_relaxed); }

// Sequences a fused decode step takes at most. At batch 1 the fused step ran 1.05x (quartiles
// 1.02-1.09 BF16, 1.03-1.07 F32) the op-by-op one on an AMD Zen 5 VM at 2 threads; at batch 2 0.99, at 8
// and 32 0.96-0.98, where the op-by-op convs and memory (each split over the pool, prefetching the next
// sequence's state) already keep both threads busy (bench/README.md).
constexpr size_t kMaxFusedDecodeSequences = 1;

bool DeltaStyleCore::FusesDecode(const Context& ctx, const MixerBatch& batch, int64_t tokens) const {
  return ctx.device == kernels::Device::kCpu && memory.AggregatesAfterOnline() &&
         qkv.FusesDecode() &&
         batch.slots.size() <= kMaxFusedDecodeSequences && tokens == static_cast<int64_t>(batch.slots.size()) &&
         !DecodeFusionOffForTesting();
}

absl::StatusOr<kernels::TensorList> DeltaStyleCore::ProjectDecode(const Context& ctx, const Tensor& x,
                                                                  std::span<const Tensor* const> gates) const {
  kernels::TensorPtrList extra(gates.begin(), gates.end());
  if (output.gate_weight() != nullptr) extra.push_back(output.gate_weight());
  return qkv.Project(ctx, x, extra);
}

absl::Status DeltaStyleCore::FinishDecode(const Context& ctx, const Tensor& x, const kernels::TensorList& projected,
                                          const DecodeGates& gates, const MixerBatch& batch, LayerState& state,
                                          Tensor* out) const {
  const int64_t t = projected[0].dim(0), h = dims.v_heads;
  kernels::DeltaDecodeArgs args{.beta_logits = gates.beta_logits, .beta_scale = gates.beta_scale,
                                .decay_logits = gates.decay_logits, .a_log = gates.a_log, .dt_bias = gates.dt_bias};
  std::array<Tensor, 3> rows;  // q, k, v convolved (q and k then normalised in place): [T, H·K], [T, H·K], [T, H·V]
  for (int i = 0; i < 3; ++i) {
    MCSERVE_ASSIGN_OR_RETURN(rows[i], NewF32ForOverwrite(ctx, projected[i].shape()));
  }
  qkv.SetDecodeConvs(std::span(projected).first(3), rows, batch.layout, state, &args);
  MCSERVE_ASSIGN_OR_RETURN(Tensor q, rows[0].Reshape({t, h, dims.dk}));
  MCSERVE_ASSIGN_OR_RETURN(Tensor k, rows[1].Reshape({t, h, dims.dk}));
  MCSERVE_ASSIGN_OR_RETURN(Tensor v, rows[2].Reshape({t, h, dims.dv}));
  MCSERVE_ASSIGN_OR_RETURN(Tensor beta, NewF32ForOverwrite(ctx, {t, h}));  // written by DeltaDecode
  std::optional<Tensor> decay;                                                 // [T, H], likewise
  if (gates.decay_logits != nullptr) {
    MCSERVE_ASSIGN_OR_RETURN(decay, NewF32ForOverwrite(ctx, {t, h}));
  }
  MCSERVE_ASSIGN_OR_RETURN(Tensor o, NewF32(ctx, {t, h, dims.dv}));
  args.beta = &beta;
  args.decay = decay ? &*decay : nullptr;
  args.memory = {.rule = kernels::LinearMemoryRule::kGatedDelta, .q = &q, .k = &k, .v = &v,
                 .decay = decay ? &*decay : nullptr, .beta = &beta, .layout = batch.layout,
                 .state = &state.at("memory"), .out = &o};
  MCSERVE_RETURN_IF_ERROR(kernels::DeltaDecode(ctx, args));
  if (memory.caches()) {  // o_on from DeltaDecode, then the checkpoints' read-out
    const LinearRule rule({.rule = kernels::LinearMemoryRule::kGatedDelta, .q = &q, .k = &k, .v = &v,
                           .decay = args.decay, .beta = &beta},
                          "");
    MCSERVE_RETURN_IF_ERROR(memory.RunAfterOnline(ctx, x, rule, batch, state, &o));
  }
  fused_decode_steps.fetch_add(1, std::memory_order_relaxed);
  return output.RunProjected(ctx, output.gate_weight() != nullptr ? &projected.back() : nullptr, o, out);
}

absl::StatusOr<Tensor> SigmoidGate(const Context& ctx, const Tensor& x, const Tensor& w, float scale) {
  MCSERVE_ASSIGN_OR_RETURN(Tensor g, Project(ctx, x, w));
  return SigmoidGate(ctx, std::move(g), scale);
}

absl::StatusOr<Tensor> SigmoidGate(const Context& ctx, Tensor projected, float scale) {
  MCSERVE_RETURN_IF_ERROR(Activate(ctx, projected, ActivationKind::kSigmoid, scale));
  return projected;
}

}  // namespace mcserve::engine
