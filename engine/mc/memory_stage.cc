// MemoryStage (memory_stage.h): binding, the state it adds, and the dispatch of a pass to the
// rule alone (no MC) or to one of the segmentations.
#include "engine/mc/memory_stage.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/mc/mc_pass.h"
#include "engine/runner/mixer_ops.h"

namespace mcserve::engine {

using kernels::Context;
using kernels::Tensor;

absl::StatusOr<MemoryStage> MemoryStage::Bind(const ModelConfig& c, const WeightBinder& w, int layer, Shape shape,
                                              Aux aux, bool normalized) {
  MemoryStage m;
  m.layer_ = layer;
  m.shape_ = shape;
  m.aux_ = std::move(aux);
  if (!c.memory_caching || !c.memory_caching->AppliesTo(layer)) return m;
  McConfig mc = *c.memory_caching;
  const std::string where = absl::StrCat("layer ", layer, ": Memory Caching ");
  if (normalized) {
    return absl::UnimplementedError(where + "on normalised linear attention (norm_feature_map) is not supported");
  }
  // Logarithmic segments restart per-level compressors (independent) or nothing (checkpoint); an
  // auxiliary state that must behave otherwise (SWLA's swla_cross_boundary) has no defined meaning.
  if (mc.segmentation == McSegmentation::kLogarithmic && !m.aux_.name.empty() &&
      m.aux_.reset_at_segment_start != (mc.init_mode == McInitMode::kIndependent)) {
    return absl::UnimplementedError(where + "with logarithmic segments needs swla_cross_boundary = "
                                            "(init_mode == checkpoint)");
  }
  const std::string u_name = absl::StrCat("model.layers.", layer, ".attn.mc.u_proj.weight");
  if (!mc.gate) mc.gate = w.Has(u_name) ? McGate::kUProj : McGate::kQ;
  if (*mc.gate == McGate::kUProj) {
    MCSERVE_ASSIGN_OR_RETURN(Tensor u, w.Matrix(u_name, {shape.q_heads * shape.dk, c.hidden_size}));
    m.u_proj_ = std::move(u);
  }
  m.mc_ = mc;
  return m;
}

void MemoryStage::AddStateSpecs(std::vector<StateSpec>* specs) const {
  if (!mc_) return;
  if (mc_->segmentation == McSegmentation::kLogarithmic) {
    specs->push_back({"mc_level_pool", {shape_.state_heads, kLevels, shape_.dk}});
    if (mc_->init_mode == McInitMode::kIndependent) {  // a copy of the rule's state per level
      kernels::Shape memory = PageShape();
      memory.insert(memory.begin(), kLevels);
      specs->push_back({"mc_level_memory", memory});
      for (const StateSpec& s : RuleStates()) {
        kernels::Shape level = s.per_slot;
        level.insert(level.begin(), kLevels);
        specs->push_back({"mc_level_" + s.name, level});
      }
    }
    return;
  }
  specs->push_back({"mc_pool_sum", {shape_.state_heads, shape_.dk}});
  if (SumsCheckpoints()) specs->push_back({"mc_sum", PageShape()});
}

kernels::Shape MemoryStage::PageShape() const {
  if (shape_.mlp_params > 0) return {shape_.state_heads, shape_.mlp_params};
  return {shape_.state_heads, shape_.dk, shape_.dv};
}

bool MemoryStage::SumsCheckpoints() const {
  if (!mc_ || mc_->segmentation != McSegmentation::kConstant) return false;
  if (mc_->aggregation == McAggregation::kMean) return true;
  return mc_->aggregation == McAggregation::kResidual && shape_.mlp_params == 0;
}

absl::Status MemoryStage::Run(const Context& ctx, const Tensor& x, const MemoryRule& rule, const MixerBatch& batch,
                              LayerState& state, Tensor* o) const {
  if (!mc_) return rule.Run(ctx, RowRange(0, x.dim(0)), batch.layout, batch.positions, state, o);
  return RunCaching({.ctx = ctx, .rule = rule, .batch = batch, .state = state, .out = o}, x);
}

absl::Status MemoryStage::RunCaching(McPass pass, const Tensor& x) const {
  MCSERVE_ASSIGN_OR_RETURN(auto qu, QueryAndGate(pass.ctx, x, pass.rule.query()));
  pass.q = std::move(qu.first);
  pass.u = std::move(qu.second);
  if (mc_->segmentation == McSegmentation::kLogarithmic) return RunLogarithmic(pass);
  return RunConstant(pass);
}

bool MemoryStage::AggregatesAfterOnline() const {
  return !mc_ || mc_->segmentation == McSegmentation::kConstant;
}

absl::Status MemoryStage::RunAfterOnline(const Context& ctx, const Tensor& x, const MemoryRule& rule,
                                         const MixerBatch& batch, LayerState& state, Tensor* o) const {
  if (!AggregatesAfterOnline() || (mc_ && rule.ReadsOnlineWeights(mc_->aggregation)) ||
      x.dim(0) != static_cast<int64_t>(batch.slots.size())) {
    return absl::InternalError(absl::StrCat("layer ", layer_, ": MemoryStage::RunAfterOnline takes decode steps "
                                            "with constant segments only"));
  }
  if (!mc_) return absl::OkStatus();
  return RunCaching({.ctx = ctx, .rule = rule, .batch = batch, .state = state, .out = o, .online_done = true}, x);
}

absl::StatusOr<std::pair<Tensor, Tensor>> MemoryStage::QueryAndGate(const Context& ctx, const Tensor& x,
                                                                     const Tensor& q) const {
  MCSERVE_ASSIGN_OR_RETURN(Tensor q_state, ExpandHeads(ctx, q, shape_.state_heads));
  if (!u_proj_) return std::make_pair(q_state, q_state);
  MCSERVE_ASSIGN_OR_RETURN(Tensor projected, Project(ctx, x, *u_proj_));
  MCSERVE_ASSIGN_OR_RETURN(Tensor heads, projected.Reshape({x.dim(0), shape_.q_heads, shape_.dk}));
  MCSERVE_ASSIGN_OR_RETURN(Tensor u, ExpandHeads(ctx, heads, shape_.state_heads));
  return std::make_pair(q_state, u);
}

}  // namespace mcserve::engine
