#include "engine/runner/adaptive_cms.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/runner/mixer_ops.h"
#include "kernels/cms_backward/cms_backward.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/linear/linear.h"
#include "kernels/rms_norm/rms_norm.h"

namespace mcserve::engine {

using kernels::Context;
using kernels::Tensor;

namespace {

constexpr const char* kWeightNames[] = {"gate", "up", "down"};

// xᵀ of the F32 matrix x [a, b] → [b, a].
absl::StatusOr<Tensor> Transposed(const Context& ctx, const Tensor& x) {
  MCSERVE_ASSIGN_OR_RETURN(Tensor t, NewF32(ctx, {x.dim(1), x.dim(0)}));
  MCSERVE_RETURN_IF_ERROR(kernels::Transpose(ctx, {.x = &x, .out = &t}));
  return t;
}

// A fresh F32 copy of x.
absl::StatusOr<Tensor> Copy(const Context& ctx, const Tensor& x) {
  MCSERVE_ASSIGN_OR_RETURN(Tensor t, NewF32(ctx, x.shape()));
  MCSERVE_RETURN_IF_ERROR(t.CopyFrom(x));
  return t;
}

// out [a, b] += col [a] ⊗ row [b] (an outer product through Linear with inner size 1).
absl::Status AddOuter(const Context& ctx, const Tensor& col, const Tensor& row, Tensor& out) {
  MCSERVE_ASSIGN_OR_RETURN(Tensor c, col.Reshape({col.numel(), 1}));
  MCSERVE_ASSIGN_OR_RETURN(Tensor r, row.Reshape({row.numel(), 1}));
  return kernels::Linear(ctx, {.x = &c, .w = &r, .out = &out, .accumulate = true});
}

}  // namespace

std::string AdaptiveCmsLayer::Name(int j, const char* kind, const char* weight) const {
  return absl::StrCat("cms.", j, ".", kind, ".", weight);
}

absl::StatusOr<AdaptiveCmsLayer> AdaptiveCmsLayer::Bind(const ModelConfig& c, const WeightBinder& w, int layer) {
  const Context ctx{.device = w.device()};
  const std::string p = absl::StrCat("model.layers.", layer, ".");
  AdaptiveCmsLayer a;
  a.hidden_ = c.hidden_size;
  a.eps_ = c.norm_eps;
  MCSERVE_ASSIGN_OR_RETURN(a.attn_norm_, w.Float(p + "attn_norm.weight", {a.hidden_}));
  for (size_t j = 0; j < c.hope.cms_levels.size(); ++j) {
    const CmsLevel& cms = c.hope.cms_levels[j];
    const std::string q = absl::StrCat(p, "cms.", j, ".");
    const int64_t d = a.hidden_, f = cms.intermediate_size;
    Level& L = a.levels_.emplace_back();
    L.adaptive = c.hope.Adapts(cms);
    L.lr = cms.lr;
    L.chunk_size = cms.chunk_size;
    L.inter = f;
    MCSERVE_ASSIGN_OR_RETURN(L.norm, w.Float(q + "norm.weight", {d}));
    MCSERVE_ASSIGN_OR_RETURN(L.theta0.up, w.Float(q + "up_proj.weight", {f, d}));
    MCSERVE_ASSIGN_OR_RETURN(L.theta0.down, w.Float(q + "down_proj.weight", {d, f}));
    if (cms.swiglu) {
      MCSERVE_ASSIGN_OR_RETURN(L.theta0.gate, w.Float(q + "gate_proj.weight", {f, d}));
    }
    if (L.adaptive) continue;
    MCSERVE_ASSIGN_OR_RETURN(L.theta0.up_t, Transposed(ctx, L.theta0.up));
    MCSERVE_ASSIGN_OR_RETURN(L.theta0.down_t, Transposed(ctx, L.theta0.down));
    if (L.theta0.gate) {
      MCSERVE_ASSIGN_OR_RETURN(L.theta0.gate_t, Transposed(ctx, *L.theta0.gate));
    }
  }
  return a;
}

void AdaptiveCmsLayer::AddStateSpecs(std::vector<StateSpec>* specs) const {
  for (size_t j = 0; j < levels_.size(); ++j) {
    const Level& L = levels_[j];
    if (!L.adaptive) continue;
    for (const char* kind : {"delta", "grad"}) {
      if (L.theta0.gate) specs->push_back({Name(j, kind, "gate"), {L.inter, hidden_}});
      specs->push_back({Name(j, kind, "up"), {L.inter, hidden_}});
      specs->push_back({Name(j, kind, "down"), {hidden_, L.inter}});
    }
  }
  specs->push_back({"cms_last_x", {hidden_}});
  specs->push_back({"cms_last_h", {hidden_}});
}

absl::Status AdaptiveCmsLayer::Restart(int slot, LayerState& state) const {
  for (size_t j = 0; j < levels_.size(); ++j) {
    if (!levels_[j].adaptive) continue;
    for (const char* kind : {"delta", "grad"}) {
      for (const char* weight : kWeightNames) {
        if (weight == kWeightNames[0] && !levels_[j].theta0.gate) continue;
        MCSERVE_RETURN_IF_ERROR(ZeroSlot(state.at(Name(j, kind, weight)), slot));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status AdaptiveCmsLayer::ApplyBoundaries(const Context& ctx, int slot, int64_t position, LayerState& state) const {
  for (size_t j = 0; j < levels_.size(); ++j) {
    const Level& L = levels_[j];
    if (!L.adaptive || position == 0 || position % L.chunk_size != 0) continue;
    for (const char* weight : kWeightNames) {
      if (weight == kWeightNames[0] && !L.theta0.gate) continue;
      Tensor& grad_all = state.at(Name(j, "grad", weight));
      Tensor grad = grad_all.Rows(slot, slot + 1), delta = state.at(Name(j, "delta", weight)).Rows(slot, slot + 1);
      MCSERVE_ASSIGN_OR_RETURN(Tensor step, NewF32(ctx, grad.shape()));  // −lr·G
      MCSERVE_RETURN_IF_ERROR(kernels::Activation(
          ctx, {.kind = kernels::ActivationKind::kIdentity, .x = &grad, .scale = static_cast<float>(-L.lr), .out = &step}));
      MCSERVE_RETURN_IF_ERROR(kernels::Add(ctx, {.a = &delta, .b = &step, .out = &delta}));
      MCSERVE_RETURN_IF_ERROR(ZeroSlot(grad_all, slot));
    }
  }
  return absl::OkStatus();
}

absl::Status AdaptiveCmsLayer::SaveLast(int slot, const char* name, const Tensor& row, LayerState& state) const {
  Tensor dst = state.at(name).Rows(slot, slot + 1);
  return dst.CopyFrom(row);
}

absl::StatusOr<AdaptiveCmsLayer::Weights> AdaptiveCmsLayer::SlotWeights(const Context& ctx, int j, int slot,
                                                                        LayerState& state, bool transposes) const {
  const Level& L = levels_[j];
  if (!L.adaptive) return L.theta0;
  Weights w;
  const auto sum = [&](const Tensor& base, const char* weight) -> absl::StatusOr<Tensor> {
    MCSERVE_ASSIGN_OR_RETURN(Tensor delta, state.at(Name(j, "delta", weight)).Rows(slot, slot + 1).Reshape(base.shape()));
    MCSERVE_ASSIGN_OR_RETURN(Tensor out, NewF32(ctx, base.shape()));
    MCSERVE_RETURN_IF_ERROR(kernels::Add(ctx, {.a = &base, .b = &delta, .out = &out}));
    return out;
  };
  MCSERVE_ASSIGN_OR_RETURN(w.up, sum(L.theta0.up, "up"));
  MCSERVE_ASSIGN_OR_RETURN(w.down, sum(L.theta0.down, "down"));
  if (L.theta0.gate) {
    MCSERVE_ASSIGN_OR_RETURN(w.gate, sum(*L.theta0.gate, "gate"));
  }
  if (!transposes) return w;
  MCSERVE_ASSIGN_OR_RETURN(w.up_t, Transposed(ctx, w.up));
  MCSERVE_ASSIGN_OR_RETURN(w.down_t, Transposed(ctx, w.down));
  if (w.gate) {
    MCSERVE_ASSIGN_OR_RETURN(w.gate_t, Transposed(ctx, *w.gate));
  }
  return w;
}

absl::StatusOr<AdaptiveCmsLayer::Trace> AdaptiveCmsLayer::LevelForward(const Context& ctx, int j, const Weights& wt,
                                                                       Tensor& z) const {
  Trace tr;
  MCSERVE_ASSIGN_OR_RETURN(tr.z_in, Copy(ctx, z));
  MCSERVE_ASSIGN_OR_RETURN(tr.normed, NewF32(ctx, z.shape()));
  MCSERVE_RETURN_IF_ERROR(kernels::RmsNorm(ctx, {.x = &z, .weight = &levels_[j].norm, .eps = eps_, .out = &tr.normed}));
  MCSERVE_ASSIGN_OR_RETURN(tr.up, Project(ctx, tr.normed, wt.up));  // [1, F]
  if (wt.gate) {
    MCSERVE_ASSIGN_OR_RETURN(tr.gate, Project(ctx, tr.normed, *wt.gate));
    MCSERVE_ASSIGN_OR_RETURN(tr.m, NewF32(ctx, tr.up.shape()));
    MCSERVE_RETURN_IF_ERROR(kernels::SwiGlu(ctx, {.gate = &tr.gate, .up = &tr.up, .out = &tr.m}));
  } else {
    MCSERVE_ASSIGN_OR_RETURN(tr.m, Copy(ctx, tr.up));
    MCSERVE_RETURN_IF_ERROR(Activate(ctx, tr.m, kernels::ActivationKind::kGelu));
  }
  MCSERVE_RETURN_IF_ERROR(kernels::Linear(ctx, {.x = &tr.m, .w = &wt.down, .out = &z, .accumulate = true}));
  return tr;
}

absl::Status AdaptiveCmsLayer::Forward(const Context& ctx, int slot, LayerState& state, Tensor& h) const {
  for (size_t j = 0; j < levels_.size(); ++j) {
    MCSERVE_ASSIGN_OR_RETURN(Weights wt, SlotWeights(ctx, j, slot, state, /*transposes=*/false));
    MCSERVE_RETURN_IF_ERROR(LevelForward(ctx, j, wt, h).status());
  }
  return absl::OkStatus();
}

absl::Status AdaptiveCmsLayer::LevelBackward(const Context& ctx, int j, const Weights& wt, const Trace& tr, int slot,
                                             LayerState& state, Tensor& dz) const {
  const Level& L = levels_[j];
  const auto grad = [&](const char* weight) { return state.at(Name(j, "grad", weight)).Rows(slot, slot + 1).Reshape(
                                                  weight == kWeightNames[2] ? kernels::Shape{hidden_, L.inter}
                                                                            : kernels::Shape{L.inter, hidden_}); };
  if (L.adaptive) {
    MCSERVE_ASSIGN_OR_RETURN(Tensor g_down, grad("down"));
    MCSERVE_RETURN_IF_ERROR(AddOuter(ctx, dz, tr.m, g_down));  // ∂L/∂down = dz ⊗ m
  }
  MCSERVE_ASSIGN_OR_RETURN(Tensor dm, Project(ctx, dz, wt.down_t));  // [1, F]
  MCSERVE_ASSIGN_OR_RETURN(Tensor d_up, NewF32(ctx, dm.shape()));
  std::optional<Tensor> d_gate;
  if (wt.gate) {
    MCSERVE_ASSIGN_OR_RETURN(d_gate, NewF32(ctx, dm.shape()));
    MCSERVE_RETURN_IF_ERROR(kernels::GluBackward(ctx, {.gate = &tr.gate, .up = &tr.up, .dm = &dm, .dgate = &*d_gate, .dup = &d_up}));
  } else {
    MCSERVE_RETURN_IF_ERROR(kernels::GluBackward(ctx, {.up = &tr.up, .dm = &dm, .dup = &d_up}));
  }
  if (L.adaptive) {
    MCSERVE_ASSIGN_OR_RETURN(Tensor g_up, grad("up"));
    MCSERVE_RETURN_IF_ERROR(AddOuter(ctx, d_up, tr.normed, g_up));
    if (d_gate) {
      MCSERVE_ASSIGN_OR_RETURN(Tensor g_gate, grad("gate"));
      MCSERVE_RETURN_IF_ERROR(AddOuter(ctx, *d_gate, tr.normed, g_gate));
    }
  }
  MCSERVE_ASSIGN_OR_RETURN(Tensor d_normed, Project(ctx, d_up, wt.up_t));  // [1, D]
  if (d_gate) MCSERVE_RETURN_IF_ERROR(kernels::Linear(ctx, {.x = &*d_gate, .w = &*wt.gate_t, .out = &d_normed, .accumulate = true}));
  MCSERVE_ASSIGN_OR_RETURN(Tensor d_in, NewF32(ctx, dz.shape()));
  MCSERVE_RETURN_IF_ERROR(kernels::RmsNormBackward(ctx, {.x = &tr.z_in, .weight = &L.norm, .dy = &d_normed, .eps = eps_, .dx = &d_in}));
  return kernels::Add(ctx, {.a = &dz, .b = &d_in, .out = &dz});
}

absl::Status AdaptiveCmsLayer::Backward(const Context& ctx, int slot, LayerState& state, Tensor& dz) const {
  MCSERVE_ASSIGN_OR_RETURN(Tensor z, Copy(ctx, state.at("cms_last_h").Rows(slot, slot + 1)));  // [1, D]
  std::vector<Weights> weights;
  std::vector<Trace> traces;
  for (size_t j = 0; j < levels_.size(); ++j) {
    MCSERVE_ASSIGN_OR_RETURN(weights.emplace_back(), SlotWeights(ctx, j, slot, state, /*transposes=*/true));
    MCSERVE_ASSIGN_OR_RETURN(traces.emplace_back(), LevelForward(ctx, j, weights.back(), z));
  }
  for (int j = static_cast<int>(levels_.size()) - 1; j >= 0; --j) {
    MCSERVE_RETURN_IF_ERROR(LevelBackward(ctx, j, weights[j], traces[j], slot, state, dz));
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> AdaptiveCmsLayer::SavedNormedInput(const Context& ctx, int slot, LayerState& state) const {
  const Tensor x = state.at("cms_last_x").Rows(slot, slot + 1);  // [1, D]
  MCSERVE_ASSIGN_OR_RETURN(Tensor u, NewF32(ctx, x.shape()));
  MCSERVE_RETURN_IF_ERROR(kernels::RmsNorm(ctx, {.x = &x, .weight = &attn_norm_, .eps = eps_, .out = &u}));
  return u;
}

absl::Status AdaptiveCmsLayer::AddAttnNormBackward(const Context& ctx, int slot, LayerState& state, const Tensor& du,
                                                   Tensor& dz) const {
  const Tensor x = state.at("cms_last_x").Rows(slot, slot + 1);  // [1, D]
  MCSERVE_ASSIGN_OR_RETURN(Tensor dx, NewF32(ctx, x.shape()));
  MCSERVE_RETURN_IF_ERROR(kernels::RmsNormBackward(ctx, {.x = &x, .weight = &attn_norm_, .dy = &du, .eps = eps_, .dx = &dx}));
  return kernels::Add(ctx, {.a = &dz, .b = &dx, .out = &dz});
}

}  // namespace mcserve::engine
