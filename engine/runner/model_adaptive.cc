// Model's adaptive CMS (hope cms_adaptive; docs/model-format.md, `hope`): chunks run one token per slot
// per step; before each token the slot trains on its saved last token's loss (when the token is
// user-provided) and applies the levels whose period ends there, so any split of a sequence into
// calls gives the same state and logits (decode = a longer prefill).
#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/runner/mixer_ops.h"
#include "engine/runner/model_block.h"
#include "kernels/cms_backward/cms_backward.h"

namespace mcserve::engine {

using kernels::Tensor;

absl::Status Model::BindAdaptiveHead(WeightBinder& w) {
  const ModelConfig& c = config_;
  MCSERVE_ASSIGN_OR_RETURN(final_norm_f32_, w.Float("model.norm.weight", {c.hidden_size}));
  const bool tied = c.tie_word_embeddings && !w.Has("lm_head.weight");
  MCSERVE_ASSIGN_OR_RETURN(Tensor head, w.Float(tied ? "model.embeddings.weight" : "lm_head.weight",
                                                {c.vocab_size, c.hidden_size}));
  MCSERVE_ASSIGN_OR_RETURN(lm_head_t_, NewF32(ctx_, {c.hidden_size, c.vocab_size}));
  return kernels::Transpose(ctx_, {.x = &head, .out = &lm_head_t_});
}

absl::Status Model::SaveRows(const Block& b, const char* name, Tensor& h, const MixerBatch& batch,
                             LayerState& state) const {
  for (size_t i = 0; i < batch.slots.size(); ++i) {
    const Tensor row = h.Rows(static_cast<int64_t>(i), static_cast<int64_t>(i) + 1);  // [1, H]
    MCSERVE_RETURN_IF_ERROR(b.adaptive->SaveLast(batch.slots[i], name, row, state));
  }
  return absl::OkStatus();
}

absl::Status Model::RunAdaptiveCms(const Block& b, Tensor& h, const MixerBatch& batch, LayerState& state) const {
  MCSERVE_RETURN_IF_ERROR(SaveRows(b, "cms_last_h", h, batch, state));
  for (size_t i = 0; i < batch.slots.size(); ++i) {
    Tensor row = h.Rows(static_cast<int64_t>(i), static_cast<int64_t>(i) + 1);  // [1, H]
    MCSERVE_RETURN_IF_ERROR(b.adaptive->Forward(ctx_, batch.slots[i], state, row));
  }
  return absl::OkStatus();
}

absl::Status Model::LearnLastToken(int slot, int32_t target, StatePool& pool) const {
  const int64_t h = config_.hidden_size;
  const Block& top = blocks_.back();
  MCSERVE_ASSIGN_OR_RETURN(Tensor z, NewF32(ctx_, {1, h}));  // the top CMS output of the saved token
  MCSERVE_RETURN_IF_ERROR(z.CopyFrom(pool.layer(blocks_.size() - 1).at("cms_last_h").Rows(slot, slot + 1)));
  MCSERVE_RETURN_IF_ERROR(top.adaptive->Forward(ctx_, slot, pool.layer(blocks_.size() - 1), z));
  MCSERVE_ASSIGN_OR_RETURN(Tensor normed, NewF32(ctx_, {1, h}));
  MCSERVE_RETURN_IF_ERROR(final_norm_.Apply(ctx_, z, config_.norm_eps, normed));
  MCSERVE_ASSIGN_OR_RETURN(Tensor logits, Project(ctx_, normed, lm_head_));  // [1, vocab] → ∂L/∂logits
  const std::vector<int32_t> targets = {target};
  MCSERVE_ASSIGN_OR_RETURN(Tensor target_t, Tensor::FromHostI32(targets, {1}, ctx_.device));
  MCSERVE_RETURN_IF_ERROR(kernels::XentGrad(ctx_, {.logits = &logits, .targets = &target_t, .grad = &logits}));
  MCSERVE_ASSIGN_OR_RETURN(Tensor d_normed, Project(ctx_, logits, lm_head_t_));  // [1, H]
  MCSERVE_ASSIGN_OR_RETURN(Tensor dz, NewF32(ctx_, {1, h}));
  MCSERVE_RETURN_IF_ERROR(kernels::RmsNormBackward(
      ctx_, {.x = &z, .weight = &final_norm_f32_, .dy = &d_normed, .eps = config_.norm_eps, .dx = &dz}));
  for (size_t l = blocks_.size(); l-- > 0;) {
    const Block& b = blocks_[l];
    LayerState& state = pool.layer(l);
    MCSERVE_RETURN_IF_ERROR(b.adaptive->Backward(ctx_, slot, state, dz));  // dz: ∂L/∂(x + mixer)
    if (l == 0) break;
    MCSERVE_ASSIGN_OR_RETURN(Tensor u, b.adaptive->SavedNormedInput(ctx_, slot, state));
    MCSERVE_ASSIGN_OR_RETURN(Tensor du, NewF32(ctx_, {1, h}));
    MCSERVE_RETURN_IF_ERROR(b.mixer->BackwardToInput(ctx_, u, dz, slot, state, &du));
    MCSERVE_RETURN_IF_ERROR(b.adaptive->AddAttnNormBackward(ctx_, slot, state, du, dz));  // ∂L/∂x
  }
  return absl::OkStatus();
}

absl::Status Model::BeginAdaptiveToken(int slot, int32_t token, bool learn, StatePool& pool) const {
  const int64_t position = pool.position(slot);
  for (size_t l = 0; l < blocks_.size(); ++l) {
    if (position == 0) MCSERVE_RETURN_IF_ERROR(blocks_[l].adaptive->Restart(slot, pool.layer(l)));
  }
  if (position > 0 && learn) MCSERVE_RETURN_IF_ERROR(LearnLastToken(slot, token, pool));
  for (size_t l = 0; l < blocks_.size(); ++l) {
    MCSERVE_RETURN_IF_ERROR(blocks_[l].adaptive->ApplyBoundaries(ctx_, slot, position, pool.layer(l)));
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> Model::ForwardAdaptive(std::span<const SequenceChunk> chunks, StatePool& pool) const {
  absl::flat_hash_set<int> seen;
  std::vector<int64_t> first_row;  // [chunks] the chunk's first logits row
  int64_t rows = 0, longest = 0;
  for (const SequenceChunk& c : chunks) {
    if (c.slot < 0 || c.slot >= pool.num_slots() || !seen.insert(c.slot).second) {
      return absl::InvalidArgumentError(absl::StrCat("Forward: slot ", c.slot, " is out of range or repeated"));
    }
    first_row.push_back(rows);
    rows += c.all_logits ? static_cast<int64_t>(c.tokens.size()) : 1;
    longest = std::max<int64_t>(longest, c.tokens.size());
  }
  MCSERVE_ASSIGN_OR_RETURN(Tensor out, NewF32(ctx_, {rows, config_.vocab_size}));  // [R, vocab]
  for (int64_t s = 0; s < longest; ++s) {
    MCSERVE_RETURN_IF_ERROR(AdaptiveStep(chunks, s, first_row, pool, out));
  }
  return out;
}

absl::Status Model::AdaptiveStep(std::span<const SequenceChunk> chunks, int64_t s, std::span<const int64_t> first_row,
                                 StatePool& pool, Tensor& out) const {
  std::vector<SequenceChunk> step;  // token s of every chunk that has one
  std::vector<size_t> owner;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const SequenceChunk& c = chunks[i];
    if (s >= static_cast<int64_t>(c.tokens.size())) continue;
    step.push_back({.slot = c.slot, .tokens = c.tokens.subspan(s, 1), .all_logits = true, .learn = c.learn});
    owner.push_back(i);
    MCSERVE_RETURN_IF_ERROR(BeginAdaptiveToken(c.slot, c.tokens[s], c.learn, pool));
  }
  MCSERVE_ASSIGN_OR_RETURN(Tensor logits, ForwardBatch(step, pool));  // [step, vocab]
  for (size_t k = 0; k < step.size(); ++k) {
    const SequenceChunk& c = chunks[owner[k]];
    if (!c.all_logits && s + 1 != static_cast<int64_t>(c.tokens.size())) continue;
    const int64_t row = first_row[owner[k]] + (c.all_logits ? s : 0);
    Tensor dst = out.Rows(row, row + 1);
    MCSERVE_RETURN_IF_ERROR(dst.CopyFrom(logits.Rows(static_cast<int64_t>(k), static_cast<int64_t>(k) + 1)));
  }
  return absl::OkStatus();
}

}  // namespace mcserve::engine
