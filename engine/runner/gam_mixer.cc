// GAM (docs/model-format.md, `gam`): over u = LN1(x) (the block's pre-norm output), the local
// pathway is a depthwise causal conv with bias (kernels/short_conv, no activation; its window of the
// last k−1 u rows is the slot's state `conv`), the global pathway the static memory-bank read
// softmax(u Mbᵀ) Mb (Linear, Softmax, Linear), and the two are fused by the sigmoid gates of
// W_g u + b_g (kernels/gated_fusion: first D rows local, last D global).
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/runner/mixer.h"
#include "engine/runner/mixer_ops.h"
#include "kernels/gated_fusion/gated_fusion.h"
#include "kernels/short_conv/short_conv.h"
#include "kernels/softmax/softmax.h"

namespace mcserve::engine {
namespace {

using kernels::Context;
using kernels::Tensor;

// bank [Ms, D] (device, F32) transposed to [D, Ms] on the same device (the read's second GEMM weight).
absl::StatusOr<Tensor> Transposed(const Tensor& bank, kernels::Device device) {
  const int64_t ms = bank.dim(0), d = bank.dim(1);
  MCSERVE_ASSIGN_OR_RETURN(std::vector<float> host, bank.ToHostF32());
  std::vector<float> t(host.size());
  for (int64_t s = 0; s < ms; ++s) {
    for (int64_t c = 0; c < d; ++c) t[c * ms + s] = host[s * d + c];
  }
  return Tensor::FromHost(t, {d, ms}, device);
}

class GamMixer : public Mixer {
 public:
  static absl::StatusOr<std::unique_ptr<Mixer>> Make(const ModelConfig& c, const WeightBinder& w, int layer) {
    auto mx = std::make_unique<GamMixer>();
    const std::string p = absl::StrCat("blocks.", layer, ".");
    const int64_t d = c.hidden_size, k = c.gam.conv_kernel_size;
    mx->d_ = d;
    mx->k_ = k;
    MCSERVE_ASSIGN_OR_RETURN(mx->conv_w_, w.Float(p + "causal_conv.weight", {d, 1, k}));  // F32: read per call
    MCSERVE_ASSIGN_OR_RETURN(mx->conv_b_, w.Float(p + "causal_conv.bias", {d}));
    MCSERVE_ASSIGN_OR_RETURN(mx->bank_, w.Float(p + "memory_bank", {c.gam.num_memory_slots, d}));
    MCSERVE_ASSIGN_OR_RETURN(mx->bank_t_, Transposed(mx->bank_, w.device()));
    MCSERVE_ASSIGN_OR_RETURN(mx->gate_w_, w.Matrix(p + "gate.weight", {2 * d, d}));
    MCSERVE_ASSIGN_OR_RETURN(mx->gate_b_, w.Float(p + "gate.bias", {2 * d}));
    return mx;
  }

  std::vector<StateSpec> StateSpecs() const override { return {{"conv", {k_ - 1, d_}}}; }

  absl::Status Forward(const Context& ctx, const Tensor& u, const MixerBatch& batch, LayerState& state,
                       Tensor* out) const override {
    MCSERVE_ASSIGN_OR_RETURN(Tensor local, NewF32(ctx, u.shape()));  // [T, D]
    MCSERVE_RETURN_IF_ERROR(kernels::ShortConv(ctx, {.x = &u, .weight = &conv_w_, .bias = &conv_b_, .silu = false,
                                                     .layout = batch.layout, .state = &state.at("conv"),
                                                     .out = &local}));
    MCSERVE_ASSIGN_OR_RETURN(Tensor slots, Project(ctx, u, bank_));  // [T, Ms] scores u·Mbᵀ
    MCSERVE_RETURN_IF_ERROR(kernels::Softmax(ctx, {.x = &slots, .out = &slots}));
    MCSERVE_ASSIGN_OR_RETURN(Tensor global, Project(ctx, slots, bank_t_));  // [T, D] = softmax · Mb
    MCSERVE_ASSIGN_OR_RETURN(Tensor gate, Project(ctx, u, gate_w_));        // [T, 2D]
    return kernels::GatedFusion(
        ctx, {.gate = &gate, .gate_bias = &gate_b_, .local = &local, .global = &global, .out = out});
  }

 private:
  int64_t d_ = 0, k_ = 0;
  Tensor conv_w_;  // [D, 1, k]
  Tensor conv_b_;  // [D]
  Tensor bank_;    // [Ms, D] F32
  Tensor bank_t_;  // [D, Ms] F32
  Tensor gate_w_;  // [2D, D]
  Tensor gate_b_;  // [2D]
};

}  // namespace

absl::StatusOr<std::unique_ptr<Mixer>> MakeGamMixer(const ModelConfig& c, const WeightBinder& w, int layer) {
  return GamMixer::Make(c, w, layer);
}

}  // namespace mcserve::engine
