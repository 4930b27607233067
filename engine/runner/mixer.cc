#include "engine/runner/mixer.h"

namespace mcserve::engine {

absl::Status Mixer::BackwardToInput(const kernels::Context&, const kernels::Tensor&, const kernels::Tensor&, int,
                                    LayerState&, kernels::Tensor*) const {
  return absl::UnimplementedError("this mixer has no gradient path (adaptive CMS is hope only)");
}

absl::StatusOr<std::unique_ptr<Mixer>> MakeMixer(const ModelConfig& config, const WeightBinder& weights,
                                                 int layer) {
  switch (config.family) {
    case ModelFamily::kLinearAttn: return MakeLinearAttnMixer(config, weights, layer);
    case ModelFamily::kGla: return MakeGlaMixer(config, weights, layer);
    case ModelFamily::kDeltaNet:
    case ModelFamily::kGatedDeltaNet: return MakeDeltaMixer(config, weights, layer);
    case ModelFamily::kSwla: return MakeSwlaMixer(config, weights, layer);
    case ModelFamily::kTitans:
      return config.deep_memory() ? MakeDeepMemoryMixer(config, weights, layer) : MakeTitansMixer(config, weights, layer);
    case ModelFamily::kDla: return MakeDeepMemoryMixer(config, weights, layer);
    case ModelFamily::kLattice: return MakeLatticeMixer(config, weights, layer);
    case ModelFamily::kHope: return MakeHopeMixer(config, weights, layer);
    case ModelFamily::kGam: return MakeGamMixer(config, weights, layer);
    case ModelFamily::kArmt: break;  // no mixer: ArmtStack runs the whole block (armt_stack.h)
  }
  return absl::InternalError("unknown model family");
}

}  // namespace mcserve::engine
