// HopeReadGrad: the gradient path of one HOPE mixer for the adaptive CMS (docs/model-format.md,
// `hope`, cms_adaptive). The fast weights and conv history are stop-gradient, so a token's output
// o = o_proj(RMSNorm_head(y)·o_norm ⊙ SiLU(g_proj u)) depends on its normed input u only through
//   q~ = q_proj u → q = L2(SiLU(conv)) → y = M_mem(q; W frozen)   and   g = g_proj u.
// With adaptive_q, q~ = M_q(x; anchor) (x = u per head, or in_proj u) replaces q_proj u, and the path
// continues through M_q's read with its anchor frozen. The mixer saves, per slot, the conv window, M_mem's
// weights its last token read with and (adaptive_q) the fast anchors (SaveBeforeScan / SaveAfterScan);
// Backward maps ∂L/∂o of that token to ∂L/∂u. Bound while loading; the rest from the engine loop thread.
#pragma once

#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/mc/memory_stage.h"
#include "engine/model/model_config.h"
#include "engine/runner/state_pool.h"
#include "engine/runner/weight_binder.h"
#include "kernels/core/context.h"
#include "kernels/core/tensor.h"

namespace mcserve::engine {

class HopeReadGrad {
 public:
  // Layer `layer`'s weights of the path (F32 copies and their transposes).
  static absl::StatusOr<HopeReadGrad> Bind(const ModelConfig& c, const WeightBinder& w, int layer);

  // Appends the per-slot snapshots: read_memory [H, Pm], when conv_size > 1 read_conv_q [K−1, H·d], and
  // with adaptive_q read_fast_anchor [H, Pf].
  void AddStateSpecs(std::vector<StateSpec>* specs) const;
  // Before the memory scan of a batch of one token per slot (after the slots' restarts): saves the conv
  // window, and M_mem's running weights when the read happens before the write.
  absl::Status SaveBeforeScan(const MixerBatch& batch, LayerState& state) const;
  // After the scan: saves the weights of an after_write read (memory) or a mode-A read (mem_anchor), and
  // with adaptive_q the fast anchors the producers used.
  absl::Status SaveAfterScan(const MixerBatch& batch, LayerState& state) const;

  // du [1, hidden] ← ∂L/∂u of slot `slot`'s last token, given its normed input u [1, hidden] and
  // dout = ∂L/∂o [1, hidden].
  absl::Status Backward(const kernels::Context& ctx, const kernels::Tensor& u, const kernels::Tensor& dout, int slot,
                        LayerState& state, kernels::Tensor* du) const;

 private:
  // Binds q_proj (and its transpose), or with adaptive_q and memory_input proj in_proj, under `attn`.
  absl::Status BindPreQuery(const ModelConfig& c, const WeightBinder& w, const std::string& attn);
  // The pre-query q~ [1, H, d] of normed input u [1, hidden]: q_proj u, or M_q(x) (adaptive_q; x [1, H, d]
  // the memory input, returned for the backward).
  absl::Status PreQuery(const kernels::Context& ctx, const kernels::Tensor& u, int slot, LayerState& state,
                        kernels::Tensor* q_pre, kernels::Tensor* x) const;
  // du [1, hidden] ← ∂L/∂u from dq [1, H, d] = ∂L/∂q~ (through q_proj, or M_q's read and in_proj).
  absl::Status PreQueryBackward(const kernels::Context& ctx, const kernels::Tensor& x, const kernels::Tensor& dq,
                                int slot, LayerState& state, kernels::Tensor* du) const;
  // M_q's raw read of x [1, H, d] with the saved anchor: y (dy null) or ∂⟨dy, y⟩/∂x into out [1, H, d].
  absl::Status ReadMq(const kernels::Context& ctx, const kernels::Tensor& x, int slot, LayerState& state,
                      const kernels::Tensor* dy, kernels::Tensor* out) const;
  // y [1, H, d] = M_mem(q; saved weights) and dq~ [1, H, d] given dy (null: forward only).
  absl::Status Read(const kernels::Context& ctx, const kernels::Tensor& q_pre, int slot, LayerState& state,
                    const kernels::Tensor* dy, kernels::Tensor* out) const;

  // The output stage's backward: d_normed [H, d] = ∂L/∂(RMSNorm_head(y)·o_norm) and, with the gate,
  // d_gate [1, H·d] = ∂L/∂(g_proj u), from d_gated [H, d] = ∂L/∂(the gated norm); y_rows [H, d].
  absl::Status OutputBackward(const kernels::Context& ctx, const kernels::Tensor& u, const kernels::Tensor& y_rows,
                              const kernels::Tensor& d_gated, kernels::Tensor* d_normed,
                              std::optional<kernels::Tensor>* d_gate) const;

  int64_t heads_ = 0, d_ = 0, conv_size_ = 1;
  int expansion_ = 2;
  bool gelu_ = false, read_after_write_ = false, read_anchor_ = false;
  float eps_ = 1e-6f;
  std::optional<kernels::Tensor> q_proj_;    // [H·d, hidden] F32 (unless adaptive_q)
  std::optional<kernels::Tensor> q_proj_t_;  // [hidden, H·d]
  std::optional<kernels::Tensor> in_proj_;   // [H·d, hidden] F32 (adaptive_q with memory_input proj)
  std::optional<kernels::Tensor> in_proj_t_; // [hidden, H·d]
  bool adaptive_q_ = false;
  int64_t pf_ = 0, q_offset_ = 0;         // floats per head of the fast memories, and where M_q starts
  kernels::Tensor q_conv_;                // [H·d, 1, K]
  std::optional<kernels::Tensor> g_proj_;    // [H·d, hidden] (output gate)
  std::optional<kernels::Tensor> g_proj_t_;  // [hidden, H·d]
  kernels::Tensor o_norm_;                // [d]
  kernels::Tensor o_proj_t_;              // [H·d, hidden]
  int64_t pm_ = 0;                        // floats of M_mem per head
};

}  // namespace mcserve::engine
