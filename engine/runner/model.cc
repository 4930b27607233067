#include "engine/runner/model.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "engine/runner/model_block.h"
#include "engine/runner/mixer_ops.h"
#include "base/status_macros.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/gather_rows/gather_rows.h"
#include "kernels/linear/linear.h"

namespace mcserve::engine {

using kernels::Tensor;

namespace {

// gam's embedding: token_embedding.weight, or head.weight (its tied alias) when only that is stored.
std::string GamEmbeddingName(const WeightBinder& w) {
  return !w.Has("token_embedding.weight") && w.Has("head.weight") ? "head.weight" : "token_embedding.weight";
}

// gam's head is tied: a stored head.weight must equal the embeddings [vocab, H].
absl::Status CheckGamTiedHead(std::shared_ptr<const WeightStore> store, const Tensor& embeddings,
                              const kernels::Shape& shape) {
  const WeightBinder host(std::move(store), kernels::Device::kCpu);  // not counted as parameters
  if (!host.Has("head.weight") || GamEmbeddingName(host) == "head.weight") return absl::OkStatus();
  MCSERVE_ASSIGN_OR_RETURN(Tensor head, host.Float("head.weight", shape));
  MCSERVE_ASSIGN_OR_RETURN(std::vector<float> a, head.ToHostF32());
  MCSERVE_ASSIGN_OR_RETURN(std::vector<float> b, embeddings.ToHostF32());
  if (a != b) return absl::InvalidArgumentError("gam: head.weight must equal token_embedding.weight (tied)");
  return absl::OkStatus();
}

// Memory Caching caches a recurrent memory; gam has none, and armt's is written once per segment.
absl::Status RefuseMemoryCaching(const ModelConfig& c, const ModelOptions& options) {
  if (options.mc_overrides.empty() && !c.memory_caching) return absl::OkStatus();
  if (c.family == ModelFamily::kArmt) {
    return absl::UnimplementedError(
        "armt: Memory Caching (memory_caching, --mc-* overrides) is not supported: ARMT's associative memory is "
        "written once per segment close");
  }
  if (c.family != ModelFamily::kGam) return absl::OkStatus();
  return absl::UnimplementedError(
      "gam: Memory Caching (memory_caching, --mc-* overrides) does not apply to this family: it has no recurrent "
      "memory to cache");
}

}  // namespace

Model::~Model() = default;

absl::StatusOr<std::unique_ptr<Model>> Model::Load(const std::string& dir, const ModelOptions& options) {
  std::unique_ptr<Model> m(new Model());
  MCSERVE_ASSIGN_OR_RETURN(m->config_, LoadModelConfig(dir));
  MCSERVE_RETURN_IF_ERROR(RefuseMemoryCaching(m->config_, options));
  MCSERVE_ASSIGN_OR_RETURN(m->config_.memory_caching,
                           ApplyMcOverrides(m->config_.memory_caching, options.mc_overrides));
  MCSERVE_ASSIGN_OR_RETURN(m->weights_, WeightStore::Open(dir));
  MCSERVE_ASSIGN_OR_RETURN(m->tokenizer_, Tokenizer::Load(dir + "/tokenizer.model"));
  const ModelConfig& c = m->config_;
  if (m->tokenizer_->vocab_size() > c.vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(dir, "/tokenizer.model has ", m->tokenizer_->vocab_size(),
                                                   " pieces but config.json vocab_size is ", c.vocab_size));
  }
  if (options.device == kernels::Device::kCpu) {
    m->pool_ = std::make_unique<kernels::cpu::ThreadPool>(options.num_threads);
  }
  m->ctx_ = {.device = options.device, .pool = m->pool_.get()};
  WeightBinder w(m->weights_, options.device);
  MCSERVE_RETURN_IF_ERROR(m->BindWeights(w));
  m->num_parameters_ = w.bound_parameters();
  // The CPU's weights now live in huge pages (WeightBinder), a device's on the device.
  m->weights_->DropResidentPages();
  return m;
}

absl::Status Model::BindWeights(WeightBinder& w) {
  const ModelConfig& c = config_;
  const int64_t h = c.hidden_size;
  const bool gam = c.family == ModelFamily::kGam;
  adaptive_cms_ = c.family == ModelFamily::kHope && c.hope.AdaptiveCms();
  if (c.family == ModelFamily::kArmt) {  // GPT-2 blocks with the associative memory: ArmtStack
    MCSERVE_ASSIGN_OR_RETURN(armt_, ArmtStack::Bind(c, w));
    embeddings_ = armt_->token_embeddings();
    lm_head_ = embeddings_;
    MCSERVE_ASSIGN_OR_RETURN(final_norm_, Norm::BindLayerNorm(w, "memory_cell.model.transformer.ln_f.", h));
    return CheckArmtAliases(*weights_);
  }
  MCSERVE_ASSIGN_OR_RETURN(embeddings_, w.Matrix(gam ? GamEmbeddingName(w) : "model.embeddings.weight",
                                                 {c.vocab_size, h}));
  if (gam) {
    MCSERVE_ASSIGN_OR_RETURN(positions_, PositionTable::Bind(c, w));
  }
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    Block b;
    if (gam) {
      MCSERVE_ASSIGN_OR_RETURN(b.attn_norm, Norm::BindLayerNorm(w, absl::StrCat("blocks.", i, ".ln1."), h));
    } else {
      MCSERVE_ASSIGN_OR_RETURN(b.attn_norm, Norm::BindRms(w, absl::StrCat("model.layers.", i, ".attn_norm.weight"), h));
    }
    MCSERVE_ASSIGN_OR_RETURN(b.mixer, MakeMixer(c, w, i));
    MCSERVE_ASSIGN_OR_RETURN(b.ffn, BindFeedForward(c, w, i));
    if (adaptive_cms_) {
      MCSERVE_ASSIGN_OR_RETURN(b.adaptive, AdaptiveCmsLayer::Bind(c, w, i));
    }
    blocks_.push_back(std::move(b));
  }
  if (gam) {
    MCSERVE_ASSIGN_OR_RETURN(final_norm_, Norm::BindLayerNorm(w, "ln_f.", h));
    lm_head_ = embeddings_;
    return CheckGamTiedHead(weights_, embeddings_, {c.vocab_size, h});
  }
  MCSERVE_ASSIGN_OR_RETURN(final_norm_, Norm::BindRms(w, "model.norm.weight", h));
  if (c.tie_word_embeddings && !w.Has("lm_head.weight")) {
    lm_head_ = embeddings_;
  } else {
    MCSERVE_ASSIGN_OR_RETURN(lm_head_, w.Matrix("lm_head.weight", {c.vocab_size, h}));
  }
  return adaptive_cms_ ? BindAdaptiveHead(w) : absl::OkStatus();
}

absl::StatusOr<StatePool> Model::NewStatePool(int num_slots, const CheckpointStoreOptions& checkpoints) const {
  std::vector<std::vector<StateSpec>> specs;
  if (armt_) specs = armt_->StateSpecs();
  for (const Block& b : blocks_) {
    specs.push_back(b.mixer->StateSpecs());
    if (b.adaptive) b.adaptive->AddStateSpecs(&specs.back());
  }
  return StatePool::Create(specs, num_slots, ctx_.device, checkpoints);
}

absl::Status Model::RunBlock(const Block& b, Tensor& h, const MixerBatch& batch, LayerState& state) const {
  const float eps = config_.norm_eps;
  MCSERVE_ASSIGN_OR_RETURN(Tensor normed, NewF32ForOverwrite(ctx_, h.shape()));  // [T, H]
  MCSERVE_RETURN_IF_ERROR(b.attn_norm.Apply(ctx_, h, eps, normed));
  if (b.adaptive) MCSERVE_RETURN_IF_ERROR(SaveRows(b, "cms_last_x", h, batch, state));
  MCSERVE_ASSIGN_OR_RETURN(Tensor mixed, NewF32(ctx_, h.shape()));
  MCSERVE_RETURN_IF_ERROR(b.mixer->Forward(ctx_, normed, batch, state, &mixed));
  MCSERVE_RETURN_IF_ERROR(kernels::Add(ctx_, {.a = &h, .b = &mixed, .out = &h}));
  if (b.adaptive) return RunAdaptiveCms(b, h, batch, state);
  return RunFeedForward(ctx_, b.ffn, eps, h);
}

int64_t Model::SegmentTokensLeft(const StatePool& pool, int slot) const {
  return armt_ ? armt_->TokensLeft(pool, slot) : std::numeric_limits<int64_t>::max();
}

absl::Status Model::CheckChunks(std::span<const SequenceChunk> chunks, const StatePool& pool) const {
  for (const SequenceChunk& c : chunks) {
    if (c.slot < 0 || c.slot >= pool.num_slots()) {
      return absl::InvalidArgumentError(absl::StrCat("Forward: slot ", c.slot, " outside [0, ", pool.num_slots(), ")"));
    }
    if (c.close_segment && !armt_) {
      return absl::InvalidArgumentError(absl::StrCat(config_.model_type, ": no segments to close (close chunk)"));
    }
    if (c.tokens.empty() && !c.close_segment) return absl::InvalidArgumentError("Forward: empty token chunk");
    for (int32_t id : c.tokens) {
      if (id < 0 || id >= config_.vocab_size) {
        return absl::InvalidArgumentError(
            absl::StrCat("token id ", id, " is outside the vocabulary [0, ", config_.vocab_size, ")"));
      }
    }
    if (positions_) {
      MCSERVE_RETURN_IF_ERROR(positions_->Check(pool.position(c.slot), static_cast<int64_t>(c.tokens.size())));
    }
  }
  return armt_ ? armt_->CheckChunks(chunks, pool) : absl::OkStatus();
}

absl::StatusOr<Tensor> Model::RunArmt(std::span<const SequenceChunk> chunks, StatePool& pool) const {
  std::vector<int32_t> slots;
  for (const SequenceChunk& c : chunks) slots.push_back(c.slot);
  std::sort(slots.begin(), slots.end());
  if (std::adjacent_find(slots.begin(), slots.end()) != slots.end()) {
    return absl::InvalidArgumentError("Forward: a slot appears twice in one batch");
  }
  return armt_->Forward(ctx_, chunks, pool);
}

absl::StatusOr<Tensor> Model::Forward(std::span<const SequenceChunk> chunks, StatePool& pool) const {
  MCSERVE_RETURN_IF_ERROR(CheckChunks(chunks, pool));
  const kernels::HostBlockCache::Scope reuse_host_blocks(&host_blocks_);
  if (armt_) return ForwardArmt(chunks, pool);
  return adaptive_cms_ ? ForwardAdaptive(chunks, pool) : ForwardBatch(chunks, pool);
}

absl::StatusOr<Tensor> Model::ForwardBatch(std::span<const SequenceChunk> chunks, StatePool& pool) const {
  // The host lists live in batch_lists_, refilled in place: a decode step allocates none.
  BatchLists& l = batch_lists_;
  l.ids.clear(), l.logit_rows.clear(), l.batch.cu.assign(1, 0), l.batch.slots.clear(), l.batch.positions.clear();
  std::vector<int32_t>& cu = l.batch.cu;
  for (const SequenceChunk& c : chunks) {
    const int32_t begin = cu.back();
    l.ids.insert(l.ids.end(), c.tokens.begin(), c.tokens.end());
    cu.push_back(static_cast<int32_t>(l.ids.size()));
    l.batch.slots.push_back(c.slot);
    l.batch.positions.push_back(pool.position(c.slot));
    for (int32_t r = c.all_logits ? begin : cu.back() - 1; r < cu.back(); ++r) l.logit_rows.push_back(r);
  }
  const int64_t t = l.ids.size(), b = l.batch.slots.size();
  MCSERVE_ASSIGN_OR_RETURN(Tensor ids_t, Tensor::FromHostI32(l.ids, {t}, ctx_.device));
  MCSERVE_ASSIGN_OR_RETURN(Tensor cu_t, Tensor::FromHostI32(cu, {b + 1}, ctx_.device));
  MCSERVE_ASSIGN_OR_RETURN(Tensor slots_t, Tensor::FromHostI32(l.batch.slots, {b}, ctx_.device));
  MixerBatch& batch = l.batch;
  batch.layout = {.cu_seqlens = &cu_t, .slot_ids = &slots_t};
  batch.checkpoints = &pool.checkpoints();
  MCSERVE_RETURN_IF_ERROR(kernels::ValidateBatchLayout(batch.layout, t, pool.num_slots()));

  MCSERVE_ASSIGN_OR_RETURN(Tensor h, NewF32ForOverwrite(ctx_, {t, config_.hidden_size}));  // residual stream
  MCSERVE_RETURN_IF_ERROR(kernels::GatherRows(ctx_, {.table = &embeddings_, .ids = &ids_t, .out = &h}));
  if (positions_) MCSERVE_RETURN_IF_ERROR(positions_->Add(ctx_, batch, h));
  for (size_t i = 0; i < blocks_.size(); ++i) {
    MCSERVE_RETURN_IF_ERROR(RunBlock(blocks_[i], h, batch, pool.layer(i)));
  }
  for (const SequenceChunk& c : chunks) pool.Advance(c.slot, static_cast<int64_t>(c.tokens.size()));
  return Logits(h, l.logit_rows);
}

absl::StatusOr<Tensor> Model::ForwardArmt(std::span<const SequenceChunk> chunks, StatePool& pool) const {
  std::vector<int32_t> logit_rows;  // content chunks' rows only
  int32_t end = 0;
  for (const SequenceChunk& c : chunks) {
    const int32_t n = c.close_segment ? static_cast<int32_t>(close_tokens()) : static_cast<int32_t>(c.tokens.size());
    const int32_t begin = end;
    end += n;
    if (c.close_segment) continue;
    for (int32_t r = c.all_logits ? begin : end - 1; r < end; ++r) logit_rows.push_back(r);
  }
  MCSERVE_ASSIGN_OR_RETURN(Tensor h, RunArmt(chunks, pool));  // [T, H]
  return Logits(h, logit_rows);
}

absl::StatusOr<Tensor> Model::Logits(const Tensor& h, std::span<const int32_t> rows) const {
  const int64_t n = static_cast<int64_t>(rows.size());
  MCSERVE_ASSIGN_OR_RETURN(Tensor rows_t, Tensor::FromHostI32(rows, {n}, ctx_.device));
  MCSERVE_ASSIGN_OR_RETURN(Tensor last, NewF32ForOverwrite(ctx_, {n, config_.hidden_size}));
  MCSERVE_RETURN_IF_ERROR(kernels::GatherRows(ctx_, {.table = &h, .ids = &rows_t, .out = &last}));
  MCSERVE_RETURN_IF_ERROR(final_norm_.Apply(ctx_, last, config_.norm_eps, last));
  return Project(ctx_, last, lm_head_);
}

}  // namespace mcserve::engine
