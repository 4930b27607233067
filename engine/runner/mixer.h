// Mixer: the recurrent memory layer of one block (linear attention, GLA, DeltaNet, gated DeltaNet,
// SWLA, Titans, DLA, Lattice, HOPE, GAM). Each family declares its per-slot state and runs a varlen batch of token
// rows — prefill chunks and one-token decodes alike — through its memory. Built at load time;
// Forward is called from the engine loop thread.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/model_config.h"
#include "engine/mc/memory_stage.h"
#include "engine/runner/state_pool.h"
#include "engine/runner/weight_binder.h"
#include "kernels/core/batch_layout.h"
#include "kernels/core/context.h"
#include "kernels/core/tensor.h"

namespace mcserve::engine {

class Mixer {
 public:
  virtual ~Mixer() = default;
  // The state tensors one slot needs in this layer.
  virtual std::vector<StateSpec> StateSpecs() const = 0;
  // Runs x [T, hidden] (the attn_norm output) through the memory, writing out [T, hidden];
  // updates the state (and Memory Caching checkpoints) of every slot in `batch`.
  virtual absl::Status Forward(const kernels::Context& ctx, const kernels::Tensor& x, const MixerBatch& batch,
                               LayerState& state, kernels::Tensor* out) const = 0;
  // Adaptive CMS (hope): du [1, hidden] ← ∂L/∂x of slot `slot`'s last token through its own path,
  // given its input x [1, hidden] and dout = ∂L/∂out [1, hidden]. Unimplemented by default.
  virtual absl::Status BackwardToInput(const kernels::Context& ctx, const kernels::Tensor& x,
                                       const kernels::Tensor& dout, int slot, LayerState& state,
                                       kernels::Tensor* dx) const;
};

// Builds layer `layer`'s mixer for `config`, binding and validating its weights.
absl::StatusOr<std::unique_ptr<Mixer>> MakeMixer(const ModelConfig& config, const WeightBinder& weights,
                                                 int layer);

// Family constructors (one file each).
absl::StatusOr<std::unique_ptr<Mixer>> MakeLinearAttnMixer(const ModelConfig& c, const WeightBinder& w, int layer);
absl::StatusOr<std::unique_ptr<Mixer>> MakeGlaMixer(const ModelConfig& c, const WeightBinder& w, int layer);
absl::StatusOr<std::unique_ptr<Mixer>> MakeDeltaMixer(const ModelConfig& c, const WeightBinder& w, int layer);
absl::StatusOr<std::unique_ptr<Mixer>> MakeSwlaMixer(const ModelConfig& c, const WeightBinder& w, int layer);
absl::StatusOr<std::unique_ptr<Mixer>> MakeTitansMixer(const ModelConfig& c, const WeightBinder& w, int layer);
// dla, and titans with memory_depth 2: the MLP memories.
absl::StatusOr<std::unique_ptr<Mixer>> MakeDeepMemoryMixer(const ModelConfig& c, const WeightBinder& w, int layer);
// lattice: the orthogonal state recurrence over unit-norm slots.
absl::StatusOr<std::unique_ptr<Mixer>> MakeLatticeMixer(const ModelConfig& c, const WeightBinder& w, int layer);
// hope: self-modifying Titans (every projection a fast-weight memory of the request).
absl::StatusOr<std::unique_ptr<Mixer>> MakeHopeMixer(const ModelConfig& c, const WeightBinder& w, int layer);
// gam: causal conv with bias + static memory-bank read, fused by sigmoid gates.
absl::StatusOr<std::unique_ptr<Mixer>> MakeGamMixer(const ModelConfig& c, const WeightBinder& w, int layer);

}  // namespace mcserve::engine
