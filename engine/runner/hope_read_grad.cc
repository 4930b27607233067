#include "engine/runner/hope_read_grad.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/runner/mixer_ops.h"
#include "kernels/cms_backward/cms_backward.h"
#include "kernels/hope_memory/hope_memory.h"
#include "kernels/hope_read/hope_read.h"
#include "kernels/linear/linear.h"
#include "kernels/rms_norm/rms_norm.h"

namespace mcserve::engine {

using kernels::Context;
using kernels::Tensor;

namespace {

// xᵀ of the F32 matrix x [a, b] → [b, a].
absl::StatusOr<Tensor> Transposed(const Context& ctx, const Tensor& x) {
  MCSERVE_ASSIGN_OR_RETURN(Tensor t, NewF32(ctx, {x.dim(1), x.dim(0)}));
  MCSERVE_RETURN_IF_ERROR(kernels::Transpose(ctx, {.x = &x, .out = &t}));
  return t;
}

// Copies slot rows of state `from` into state `to` for every slot of the batch.
absl::Status CopySlots(const MixerBatch& batch, LayerState& state, const char* from, const char* to) {
  for (int32_t slot : batch.slots) {
    Tensor dst = state.at(to).Rows(slot, slot + 1);
    MCSERVE_RETURN_IF_ERROR(dst.CopyFrom(state.at(from).Rows(slot, slot + 1)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<HopeReadGrad> HopeReadGrad::Bind(const ModelConfig& c, const WeightBinder& w, int layer) {
  const HopeConfig& h = c.hope;
  const Context ctx{.device = w.device()};
  const std::string attn = absl::StrCat("model.layers.", layer, ".attn.");
  HopeReadGrad g;
  g.heads_ = c.num_heads;
  g.d_ = c.head_k_dim;
  g.conv_size_ = c.conv_size;
  g.expansion_ = static_cast<int>(h.memory_expansion);
  g.gelu_ = h.memory_gelu;
  g.read_after_write_ = h.read_after_write;
  g.read_anchor_ = h.readout_anchor;
  g.eps_ = c.norm_eps;
  const int64_t hd = g.heads_ * g.d_;
  kernels::HopeMemoryOptions layout;  // the packed layout of "memory" and "fast" (kernels/hope_memory)
  layout.head_dim = static_cast<int>(g.d_);
  layout.expansion = g.expansion_;
  g.pm_ = kernels::HopeMemParams(layout);
  g.q_offset_ = kernels::HopeFastParams(layout);  // k, v, eta, alpha; then M_q with adaptive_q
  layout.adaptive_q = g.adaptive_q_ = h.adaptive_q;
  g.pf_ = kernels::HopeFastParams(layout);
  MCSERVE_RETURN_IF_ERROR(g.BindPreQuery(c, w, attn));
  MCSERVE_ASSIGN_OR_RETURN(g.q_conv_, w.Float(attn + "q_conv1d.weight", {hd, 1, c.conv_size}));
  if (h.output_gate) {
    MCSERVE_ASSIGN_OR_RETURN(g.g_proj_, w.Float(attn + "g_proj.weight", {hd, c.hidden_size}));
    MCSERVE_ASSIGN_OR_RETURN(g.g_proj_t_, Transposed(ctx, *g.g_proj_));
  }
  MCSERVE_ASSIGN_OR_RETURN(g.o_norm_, w.Float(attn + "o_norm.weight", {g.d_}));
  MCSERVE_ASSIGN_OR_RETURN(Tensor o_proj, w.Float(attn + "o_proj.weight", {c.hidden_size, hd}));
  MCSERVE_ASSIGN_OR_RETURN(g.o_proj_t_, Transposed(ctx, o_proj));
  return g;
}

absl::Status HopeReadGrad::BindPreQuery(const ModelConfig& c, const WeightBinder& w, const std::string& attn) {
  const Context ctx{.device = w.device()};
  const int64_t hd = heads_ * d_;
  if (!adaptive_q_) {
    MCSERVE_ASSIGN_OR_RETURN(q_proj_, w.Float(attn + "q_proj.weight", {hd, c.hidden_size}));
    MCSERVE_ASSIGN_OR_RETURN(q_proj_t_, Transposed(ctx, *q_proj_));
  } else if (c.hope.memory_input_proj) {
    MCSERVE_ASSIGN_OR_RETURN(in_proj_, w.Float(attn + "in_proj.weight", {hd, c.hidden_size}));
    MCSERVE_ASSIGN_OR_RETURN(in_proj_t_, Transposed(ctx, *in_proj_));
  }
  return absl::OkStatus();
}

void HopeReadGrad::AddStateSpecs(std::vector<StateSpec>* specs) const {
  specs->push_back({"read_memory", {heads_, pm_}});
  if (conv_size_ > 1) specs->push_back({"read_conv_q", {conv_size_ - 1, heads_ * d_}});
  if (adaptive_q_) specs->push_back({"read_fast_anchor", {heads_, pf_}});
}

absl::Status HopeReadGrad::SaveBeforeScan(const MixerBatch& batch, LayerState& state) const {
  if (conv_size_ > 1) MCSERVE_RETURN_IF_ERROR(CopySlots(batch, state, "conv_q", "read_conv_q"));
  if (read_after_write_ || read_anchor_) return absl::OkStatus();
  return CopySlots(batch, state, "memory", "read_memory");
}

absl::Status HopeReadGrad::SaveAfterScan(const MixerBatch& batch, LayerState& state) const {
  if (adaptive_q_) MCSERVE_RETURN_IF_ERROR(CopySlots(batch, state, "fast_anchor", "read_fast_anchor"));
  if (read_anchor_) return CopySlots(batch, state, "mem_anchor", "read_memory");
  if (read_after_write_) return CopySlots(batch, state, "memory", "read_memory");
  return absl::OkStatus();
}

absl::Status HopeReadGrad::Read(const Context& ctx, const Tensor& q_pre, int slot, LayerState& state,
                                const Tensor* dy, Tensor* out) const {
  const Tensor memory = state.at("read_memory").Rows(slot, slot + 1);  // [1, H, Pm]
  std::optional<Tensor> window;                                         // [1, K−1, H·d]
  if (conv_size_ > 1) window = state.at("read_conv_q").Rows(slot, slot + 1);
  return kernels::HopeRead(ctx, {.activation = gelu_ ? kernels::HopeActivation::kGelu : kernels::HopeActivation::kSilu,
                                 .expansion = expansion_, .q_pre = &q_pre, .window = window ? &*window : nullptr,
                                 .q_conv = &q_conv_, .memory = &memory, .dy = dy, .out = out});
}

absl::Status HopeReadGrad::ReadMq(const Context& ctx, const Tensor& x, int slot, LayerState& state, const Tensor* dy,
                                  Tensor* out) const {
  const Tensor anchors = state.at("read_fast_anchor").Rows(slot, slot + 1);  // [1, H, Pf]
  return kernels::HopeRead(ctx, {.activation = gelu_ ? kernels::HopeActivation::kGelu : kernels::HopeActivation::kSilu,
                                 .expansion = expansion_, .query = false, .q_pre = &x, .memory = &anchors,
                                 .weights_offset = q_offset_, .dy = dy, .out = out});
}

absl::Status HopeReadGrad::PreQuery(const Context& ctx, const Tensor& u, int slot, LayerState& state, Tensor* q_pre,
                                    Tensor* x) const {
  if (!adaptive_q_) {
    MCSERVE_ASSIGN_OR_RETURN(Tensor q_flat, Project(ctx, u, *q_proj_));  // [1, H·d]
    MCSERVE_ASSIGN_OR_RETURN(*q_pre, q_flat.Reshape({1, heads_, d_}));
    return absl::OkStatus();
  }
  MCSERVE_ASSIGN_OR_RETURN(Tensor x_flat, in_proj_ ? Project(ctx, u, *in_proj_) : absl::StatusOr<Tensor>(u));
  MCSERVE_ASSIGN_OR_RETURN(*x, x_flat.Reshape({1, heads_, d_}));
  MCSERVE_ASSIGN_OR_RETURN(*q_pre, NewF32(ctx, {1, heads_, d_}));
  return ReadMq(ctx, *x, slot, state, nullptr, q_pre);
}

absl::Status HopeReadGrad::PreQueryBackward(const Context& ctx, const Tensor& x, const Tensor& dq, int slot,
                                            LayerState& state, Tensor* du) const {
  if (!adaptive_q_) {
    MCSERVE_ASSIGN_OR_RETURN(Tensor dq_flat, dq.Reshape({1, heads_ * d_}));
    return kernels::Linear(ctx, {.x = &dq_flat, .w = &*q_proj_t_, .out = du});
  }
  MCSERVE_ASSIGN_OR_RETURN(Tensor dx, NewF32(ctx, {1, heads_, d_}));  // ∂L/∂x through M_q's read
  MCSERVE_RETURN_IF_ERROR(ReadMq(ctx, x, slot, state, &dq, &dx));
  MCSERVE_ASSIGN_OR_RETURN(Tensor dx_flat, dx.Reshape({1, heads_ * d_}));
  if (!in_proj_) return du->CopyFrom(dx_flat);
  return kernels::Linear(ctx, {.x = &dx_flat, .w = &*in_proj_t_, .out = du});
}

absl::Status HopeReadGrad::OutputBackward(const Context& ctx, const Tensor& u, const Tensor& y_rows,
                                          const Tensor& d_gated, Tensor* d_normed, std::optional<Tensor>* d_gate) const {
  *d_normed = d_gated;
  if (!g_proj_) return absl::OkStatus();
  MCSERVE_ASSIGN_OR_RETURN(Tensor gate, Project(ctx, u, *g_proj_));  // [1, H·d]
  MCSERVE_ASSIGN_OR_RETURN(Tensor gate_rows, gate.Reshape({heads_, d_}));
  MCSERVE_ASSIGN_OR_RETURN(Tensor normed, NewF32(ctx, {heads_, d_}));
  MCSERVE_RETURN_IF_ERROR(kernels::RmsNorm(ctx, {.x = &y_rows, .weight = &o_norm_, .eps = eps_, .out = &normed}));
  MCSERVE_ASSIGN_OR_RETURN(*d_gate, NewF32(ctx, {1, heads_ * d_}));
  MCSERVE_ASSIGN_OR_RETURN(Tensor d_gate_rows, (*d_gate)->Reshape({heads_, d_}));
  MCSERVE_ASSIGN_OR_RETURN(*d_normed, NewF32(ctx, {heads_, d_}));
  return kernels::GluBackward(
      ctx, {.gate = &gate_rows, .up = &normed, .dm = &d_gated, .dgate = &d_gate_rows, .dup = d_normed});
}

absl::Status HopeReadGrad::Backward(const Context& ctx, const Tensor& u, const Tensor& dout, int slot,
                                    LayerState& state, Tensor* du) const {
  Tensor q_pre, x;  // [1, H, d] q~ and (adaptive_q) the memory input
  MCSERVE_RETURN_IF_ERROR(PreQuery(ctx, u, slot, state, &q_pre, &x));
  MCSERVE_ASSIGN_OR_RETURN(Tensor y, NewF32(ctx, {1, heads_, d_}));
  MCSERVE_RETURN_IF_ERROR(Read(ctx, q_pre, slot, state, nullptr, &y));
  MCSERVE_ASSIGN_OR_RETURN(Tensor y_rows, y.Reshape({heads_, d_}));
  MCSERVE_ASSIGN_OR_RETURN(Tensor d_gated, Project(ctx, dout, o_proj_t_));  // [1, H·d] ∂L/∂(norm ⊙ gate)
  MCSERVE_ASSIGN_OR_RETURN(Tensor d_gated_rows, d_gated.Reshape({heads_, d_}));
  Tensor d_normed;               // [H, d] ∂L/∂(RMSNorm_head(y)·o_norm)
  std::optional<Tensor> d_gate;  // [1, H·d] ∂L/∂(g_proj u)
  MCSERVE_RETURN_IF_ERROR(OutputBackward(ctx, u, y_rows, d_gated_rows, &d_normed, &d_gate));
  MCSERVE_ASSIGN_OR_RETURN(Tensor dy, NewF32(ctx, {1, heads_, d_}));
  MCSERVE_ASSIGN_OR_RETURN(Tensor dy_rows, dy.Reshape({heads_, d_}));
  MCSERVE_RETURN_IF_ERROR(kernels::RmsNormBackward(
      ctx, {.x = &y_rows, .weight = &o_norm_, .dy = &d_normed, .eps = eps_, .dx = &dy_rows}));
  MCSERVE_ASSIGN_OR_RETURN(Tensor dq, NewF32(ctx, {1, heads_, d_}));  // ∂L/∂q~
  MCSERVE_RETURN_IF_ERROR(Read(ctx, q_pre, slot, state, &dy, &dq));
  MCSERVE_RETURN_IF_ERROR(PreQueryBackward(ctx, x, dq, slot, state, du));
  if (!d_gate) return absl::OkStatus();
  return kernels::Linear(ctx, {.x = &*d_gate, .w = &*g_proj_t_, .out = du, .accumulate = true});
}

}  // namespace mcserve::engine
