#include "engine/serving/recurrent_runner.h"

#include <algorithm>
#include <bit>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/serving/prompt_logprobs.h"

namespace mcserve::engine {

using kernels::Tensor;

namespace {

// Row `r` [vocab] of a [rows, vocab] host matrix.
std::span<const float> RowOf(const std::vector<float>& m, size_t r, int64_t vocab) {
  return std::span<const float>(m).subspan(r * static_cast<size_t>(vocab), static_cast<size_t>(vocab));
}

}  // namespace

absl::StatusOr<std::unique_ptr<RecurrentRunner>> RecurrentRunner::Create(const Model* model,
                                                                         const RecurrentRunnerOptions& options) {
  if (options.num_slots < 1) {
    return absl::InvalidArgumentError(absl::StrCat("runner needs at least one slot, got ", options.num_slots));
  }
  if (options.prefix_caching && options.prefix_block < 1) {
    return absl::InvalidArgumentError(absl::StrCat("prefix block of ", options.prefix_block, " tokens"));
  }
  MCSERVE_ASSIGN_OR_RETURN(StatePool pool, model->NewStatePool(options.num_slots, options.checkpoints));
  std::unique_ptr<RecurrentRunner> runner(new RecurrentRunner(model, std::move(pool)));
  runner->sequences_.resize(options.num_slots);
  if (const auto& mc = model->config().memory_caching) {
    for (int l = 0; l < model->config().num_hidden_layers; ++l) {
      if (!mc->AppliesTo(l)) continue;
      auto& tensors = runner->pool_.layer(l).tensors();
      auto it = tensors.find("memory");
      if (it != tensors.end()) runner->page_bytes_.push_back(it->second.nbytes() / options.num_slots);
    }
  }
  if (options.prefix_caching) {
    int64_t block = options.prefix_block;
    const auto& mc = model->config().memory_caching;
    if (mc && mc->segmentation == McSegmentation::kConstant) {
      block = (block + mc->segment_size - 1) / mc->segment_size * mc->segment_size;  // whole segments
    }
    if (model->config().family == ModelFamily::kArmt) {  // whole ARMT segments
      const int64_t s = model->config().armt.segment_size;
      block = (block + s - 1) / s * s;
    }
    runner->cache_ = std::make_unique<PrefixCache>(&runner->pool_.checkpoints(), block, options.prefix_cache_bytes);
  }
  return runner;
}

int RecurrentRunner::vocab_size() const { return static_cast<int>(model_->config().vocab_size); }

int64_t RecurrentRunner::SegmentPageBytes() const {
  int64_t bytes = 0;
  for (const int64_t b : page_bytes_) bytes += b;
  return bytes;
}

int64_t RecurrentRunner::PagesFrozen(int64_t position, int64_t tokens) const {
  const auto& mc = model_->config().memory_caching;
  if (!mc) return 0;
  const int64_t end = position + tokens;
  if (mc->segmentation == McSegmentation::kConstant) return end / mc->segment_size - position / mc->segment_size;
  // Logarithmic: a page per token after popping the lower levels, so a slot holds at most
  // bit_width(n) + 1 pages at token n, and a pass adds no more than it runs.
  return std::min<int64_t>(tokens, std::bit_width(static_cast<uint64_t>(end)) + 1);
}

void RecurrentRunner::MakeRoom(std::span<const SequenceChunk> chunks) {
  if (!cache_ || page_bytes_.empty()) return;
  std::vector<int64_t> pages;
  for (const SequenceChunk& c : chunks) {
    const int64_t n = PagesFrozen(pool_.position(c.slot), static_cast<int64_t>(c.tokens.size()));
    for (int64_t k = 0; k < n; ++k) pages.insert(pages.end(), page_bytes_.begin(), page_bytes_.end());
  }
  CheckpointStore& store = pool_.checkpoints();
  while (!pages.empty() && !store.HasRoomFor(pages) && cache_->EvictOne()) {
  }
}

absl::StatusOr<BeginResult> RecurrentRunner::Begin(std::span<const int32_t> prompt) {
  if (prompt.empty()) return absl::InvalidArgumentError("Begin: empty prompt");
  if (pool_.num_free() == 0) return absl::ResourceExhaustedError("Begin: every state slot is in use");
  // Room for the next closed segment of every MC layer, when both tiers are bounded.
  CheckpointStore& store = pool_.checkpoints();
  const CheckpointStoreOptions& budget = store.options();
  if (budget.device_bytes >= 0 && budget.host_bytes >= 0) {
    const int64_t need = SegmentPageBytes();
    if (need > budget.device_bytes + budget.host_bytes) {
      return absl::FailedPreconditionError(absl::StrCat(
          "checkpoint store full for any sequence: its budgets (", budget.device_bytes, " bytes on the device tier + ",
          budget.host_bytes, " on the host tier) are smaller than one segment's pages (", need,
          " bytes): no sequence can run"));
    }
    auto free_bytes = [&] {
      const CheckpointStoreStats s = store.stats();
      return budget.device_bytes + budget.host_bytes - s.device_bytes - s.host_bytes;
    };
    while (free_bytes() < need && cache_ && cache_->EvictOne()) {
    }
    if (free_bytes() < need) {
      return absl::ResourceExhaustedError(absl::StrCat("checkpoint store has no room for another sequence (",
                                                       free_bytes(), " bytes free, ", need, " needed per segment)"));
    }
  }
  MCSERVE_ASSIGN_OR_RETURN(const int slot, pool_.Acquire());  // zeroed: state, position, checkpoints
  Sequence& seq = sequences_[slot];
  seq = Sequence{.prompt_tokens = static_cast<int64_t>(prompt.size())};
  if (!cache_) return BeginResult{.slot = slot};
  const int64_t block = cache_->block_tokens();
  const int64_t max_blocks = (static_cast<int64_t>(prompt.size()) - 1) / block;  // ≥ 1 token left to run
  if (max_blocks == 0) return BeginResult{.slot = slot};
  PrefixCache::Entry* hit = cache_->Lookup(prompt, max_blocks);
  if (hit == nullptr) {
    ++prefix_misses_;
    return BeginResult{.slot = slot};
  }
  absl::Status restored = Restore(slot, *hit);
  if (!restored.ok()) {
    seq = Sequence{};
    (void)pool_.Reset(slot);
    pool_.Release(slot);
    return restored;
  }
  const int64_t cached = hit->blocks * block;
  seq.tokens.assign(prompt.begin(), prompt.begin() + cached);
  seq.last = hit;
  cache_->Use(hit);
  ++prefix_hits_;
  prefix_cached_tokens_ += cached;
  return BeginResult{.slot = slot, .cached_tokens = cached};
}

absl::Status RecurrentRunner::Restore(int slot, const PrefixCache::Entry& entry) {
  for (size_t l = 0; l < entry.state.size(); ++l) {
    for (const auto& [name, host] : entry.state[l]) {
      Tensor row = pool_.layer(static_cast<int>(l)).at(name).Rows(slot, slot + 1);
      MCSERVE_RETURN_IF_ERROR(row.CopyFrom(host));
    }
    MCSERVE_RETURN_IF_ERROR(pool_.checkpoints().Adopt(slot, static_cast<int>(l), entry.pages[l]));
  }
  const int64_t position = entry.blocks * cache_->block_tokens();
  // armt: the snapshot was taken right after the close of the segment ending there.
  const int64_t closed = model_->close_tokens() > 0 ? position / model_->config().armt.segment_size : 0;
  pool_.SetProgress(slot, position, closed);
  return absl::OkStatus();
}

int64_t RecurrentRunner::NextSnapshotAt(int slot) const {
  const Sequence& seq = sequences_[slot];
  if (!cache_ || seq.chain_broken) return -1;
  const int64_t at = ((seq.last == nullptr ? 0 : seq.last->blocks) + 1) * cache_->block_tokens();
  return at <= seq.prompt_tokens ? at : -1;
}

absl::StatusOr<StepOutput> RecurrentRunner::Step(std::span<const SequenceChunk> batch) {
  for (const SequenceChunk& s : batch) {
    if (s.slot < 0 || s.slot >= pool_.num_slots() || !pool_.in_use(s.slot) || (s.tokens.empty() != s.close_segment)) {
      return absl::InvalidArgumentError(
          absl::StrCat("Step: slot ", s.slot, " is not running, or has no tokens (or a close chunk has some)"));
    }
  }
  // Forward passes until every sequence's tokens are in; a sequence whose tokens cross the end of
  // its next prompt block stops there for a pass, so that its state is snapshotted exactly at the
  // boundary whatever chunking the engine chose.
  const int64_t vocab = model_->config().vocab_size;
  StepOutput result;
  std::vector<float>& logits = result.logits;  // [batch, vocab]
  logits.resize(batch.size() * vocab);
  result.prompt_logprobs.resize(batch.size());
  std::vector<size_t> done(batch.size(), 0);  // tokens of batch[i] already run
  std::vector<bool> closed(batch.size(), false);
  while (true) {
    std::vector<SequenceChunk> chunks;
    std::vector<size_t> which;
    for (size_t i = 0; i < batch.size(); ++i) {
      if (batch[i].close_segment) {  // no tokens, no logits: runs in the first pass
        if (!closed[i]) chunks.push_back(batch[i]), which.push_back(i), closed[i] = true;
        continue;
      }
      const size_t left = batch[i].tokens.size() - done[i];
      if (left == 0) continue;
      size_t take = left;
      const int64_t at = NextSnapshotAt(batch[i].slot), position = pool_.position(batch[i].slot);
      if (at > position && at - position < static_cast<int64_t>(left)) take = static_cast<size_t>(at - position);
      chunks.push_back(
          {.slot = batch[i].slot, .tokens = batch[i].tokens.subspan(done[i], take), .all_logits = batch[i].all_logits,
           .learn = batch[i].learn});
      which.push_back(i);
    }
    if (chunks.empty()) break;
    MakeRoom(chunks);  // a Freeze that still finds no room fails the step (RESOURCE_EXHAUSTED)
    MCSERVE_ASSIGN_OR_RETURN(Tensor out, model_->Forward(chunks, pool_));
    MCSERVE_ASSIGN_OR_RETURN(std::vector<float> host, out.ToHostF32());  // [rows, vocab]
    size_t row = 0;  // chunk c's first row in `host`
    for (size_t c = 0; c < chunks.size(); ++c) {
      if (chunks[c].close_segment) {  // a closed segment may complete a prefix block's snapshot
        MCSERVE_RETURN_IF_ERROR(MaybeSnapshot(chunks[c].slot));
        continue;
      }
      const size_t i = which[c], n = chunks[c].tokens.size();
      const size_t rows = chunks[c].all_logits ? n : 1;
      if (chunks[c].all_logits) {
        std::vector<float>& scored = result.prompt_logprobs[i];
        // A later pass of the same chunk: its first token is scored by the previous pass's last row.
        if (done[i] > 0) scored.push_back(TokenLogProb(RowOf(logits, i, vocab), chunks[c].tokens[0]));
        for (size_t j = 0; j + 1 < n; ++j) {
          scored.push_back(TokenLogProb(RowOf(host, row + j, vocab), chunks[c].tokens[j + 1]));
        }
      }
      Sequence& seq = sequences_[batch[i].slot];
      seq.tokens.insert(seq.tokens.end(), chunks[c].tokens.begin(), chunks[c].tokens.end());
      done[i] += n;
      const auto last = host.begin() + (row + rows - 1) * vocab;
      std::copy(last, last + vocab, logits.begin() + i * vocab);
      row += rows;
      MCSERVE_RETURN_IF_ERROR(MaybeSnapshot(batch[i].slot));
    }
  }
  return result;
}

absl::Status RecurrentRunner::MaybeSnapshot(int slot) {
  Sequence& seq = sequences_[slot];
  if (!cache_ || seq.chain_broken) return absl::OkStatus();
  const int64_t block = cache_->block_tokens(), position = pool_.position(slot);
  const int64_t done = seq.last == nullptr ? 0 : seq.last->blocks;
  if (position > seq.prompt_tokens || position < (done + 1) * block) return absl::OkStatus();
  // armt: a block ends with a full segment; its snapshot waits for that segment's close chunk.
  if (position == (done + 1) * block && model_->SegmentTokensLeft(pool_, slot) == 0) return absl::OkStatus();
  if (position != (done + 1) * block) {  // the step ran past a block end: the chain cannot continue
    seq.chain_broken = true;
    return absl::OkStatus();
  }
  MCSERVE_ASSIGN_OR_RETURN(std::vector<LayerSnapshot> state, Snapshot(slot));
  std::vector<CheckpointList> pages;
  for (int l = 0; l < static_cast<int>(state.size()); ++l) pages.push_back(pool_.checkpoints().Checkpoints(slot, l));
  const std::span<const int32_t> tokens(seq.tokens.data() + done * block, block);
  PrefixCache::Entry* entry = cache_->Insert(seq.last, tokens, std::move(state), pages);
  if (entry == nullptr) {  // no room for the snapshot: stop caching this sequence's prefix
    seq.chain_broken = true;
    return absl::OkStatus();
  }
  cache_->Use(entry);
  if (seq.last != nullptr) cache_->Unuse(seq.last);
  seq.last = entry;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<LayerSnapshot>> RecurrentRunner::Snapshot(int slot) {
  std::vector<LayerSnapshot> state(model_->config().num_hidden_layers);
  for (size_t l = 0; l < state.size(); ++l) {
    LayerState& layer = pool_.layer(static_cast<int>(l));
    for (auto& [name, tensor] : layer.tensors()) {
      if (layer.is_scratch(name)) continue;  // empty at a snapshot (armt's KV right after a close)
      const Tensor row = tensor.Rows(slot, slot + 1);
      MCSERVE_ASSIGN_OR_RETURN(Tensor host, Tensor::Zeros(row.dtype(), row.shape(), kernels::Device::kCpu));
      MCSERVE_RETURN_IF_ERROR(host.CopyFrom(row));
      state[l].emplace_back(name, std::move(host));
    }
    std::sort(state[l].begin(), state[l].end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  }
  return state;
}

void RecurrentRunner::End(int slot) {
  if (slot < 0 || slot >= pool_.num_slots() || !pool_.in_use(slot)) return;
  Sequence& seq = sequences_[slot];
  if (seq.last != nullptr) cache_->Unuse(seq.last);
  seq = Sequence{};
  pool_.checkpoints().Clear(slot);
  pool_.Release(slot);
}

RunnerStats RecurrentRunner::stats() const {
  const CheckpointStoreStats s = pool_.checkpoints().stats();
  return RunnerStats{.device_pages = s.device_pages,
                     .host_pages = s.host_pages,
                     .referenced_pages = s.referenced_pages,
                     .stagings = s.stagings,
                     .prefix_hits = prefix_hits_,
                     .prefix_misses = prefix_misses_,
                     .prefix_cached_tokens = prefix_cached_tokens_,
                     .evictions = cache_ ? cache_->evictions() : 0,
                     .prefix_cache_entries = cache_ ? cache_->entries() : 0,
                     .prefix_cache_bytes = cache_ ? cache_->bytes() : 0,
                     .prefix_cache_budget_bytes = cache_ ? cache_->byte_budget() : 0};
}

absl::Status RecurrentRunner::SanityCheck() const {
  MCSERVE_RETURN_IF_ERROR(pool_.checkpoints().SanityCheck());
  return cache_ ? cache_->SanityCheck() : absl::OkStatus();
}

}  // namespace mcserve::engine
