// Sparse Selective Caching with checkpoints on the host tier (B.5.4; memory_stage.h): the router runs on the
// device over every pooled key, the rows' choices come back to the host, only the chosen pages are
// staged into the (slot, layer) hot sets, and the read-out then sees each row's chosen pages only —
// a superset of every head's top-k in the original order, so it keeps exactly the pages the
// all-resident read-out keeps.
#include <algorithm>

#include "base/status_macros.h"
#include "engine/mc/mc_pass.h"
#include "kernels/mc_route/mc_route.h"

namespace mcserve::engine {

using kernels::Context;
using kernels::Tensor;

namespace {

// The routed rows of one sequence: which checkpoints each row chose, and its round.
struct RoutedRows {
  std::vector<std::vector<int32_t>> chosen;  // [rows] checkpoint indices, ascending
  std::vector<int> round;                    // [rows]
};

// Splits rows into consecutive rounds whose union of host-tier choices stays within `hot_pages`
// (a round always takes at least one row). Returns the number of rounds.
int AssignRounds(CheckpointList cps, int hot_pages, RoutedRows& rows) {
  std::vector<bool> in_round(cps.size(), false);
  int round = 0, host_in_round = 0, rows_in_round = 0;
  rows.round.assign(rows.chosen.size(), 0);
  for (size_t r = 0; r < rows.chosen.size(); ++r) {
    int added = 0;
    for (int32_t i : rows.chosen[r]) added += !in_round[i] && cps[i]->tier == CheckpointTier::kHost ? 1 : 0;
    if (rows_in_round > 0 && host_in_round + added > hot_pages) {
      ++round;
      std::fill(in_round.begin(), in_round.end(), false);
      host_in_round = rows_in_round = 0;
      added = 0;
      for (int32_t i : rows.chosen[r]) added += cps[i]->tier == CheckpointTier::kHost ? 1 : 0;
    }
    for (int32_t i : rows.chosen[r]) in_round[i] = true;
    host_in_round += added;
    ++rows_in_round;
    rows.round[r] = round;
  }
  return rows.chosen.empty() ? 0 : round + 1;
}

}  // namespace

absl::Status MemoryStage::AggregateRouted(const McPass& pass, const SubBatch& rows) const {
  const Context& ctx = pass.ctx;
  const MixerBatch& batch = pass.batch;
  const std::span<const PieceEntry> entries = rows.entries();
  const int64_t begin = rows.begin(), end = rows.end();
  CheckpointStore& store = *batch.checkpoints;
  const int64_t hs = shape_.state_heads, top_k = mc_->top_k;
  // 1. Route every row against its slot's pooled keys (always on the device).
  std::vector<const Tensor*> keys;
  std::vector<int32_t> key_base, offsets = {0}, token_pages;
  for (const PieceEntry& e : entries) {
    const std::span<const Tensor> slot_keys = store.PooledKeys(batch.slots[e.seq], layer_);
    key_base.push_back(static_cast<int32_t>(keys.size()));
    for (const Tensor& key : slot_keys) keys.push_back(&key);
    for (int64_t r = e.begin; r < e.end; ++r) {
      for (size_t i = 0; i < slot_keys.size(); ++i) token_pages.push_back(key_base.back() + static_cast<int32_t>(i));
      offsets.push_back(static_cast<int32_t>(token_pages.size()));
    }
  }
  MCSERVE_ASSIGN_OR_RETURN(Tensor offsets_t,
                           Tensor::FromHostI32(offsets, {static_cast<int64_t>(offsets.size())}, ctx.device));
  MCSERVE_ASSIGN_OR_RETURN(Tensor pages_t,
                           Tensor::FromHostI32(token_pages, {static_cast<int64_t>(token_pages.size())}, ctx.device));
  MCSERVE_ASSIGN_OR_RETURN(Tensor selected, Tensor::Zeros(kernels::DType::kI32, {end - begin, hs, top_k}, ctx.device));
  const Tensor u_rows = pass.u.Rows(begin, end);
  MCSERVE_RETURN_IF_ERROR(kernels::McRoute(ctx, {.top_k = static_cast<int>(top_k), .u = &u_rows, .pooled_keys = keys,
                                                 .token_page_offsets = &offsets_t, .token_pages = &pages_t,
                                                 .selected = &selected}));
  MCSERVE_ASSIGN_OR_RETURN(std::vector<int32_t> choice, selected.ToHostI32());  // [rows, Hs, top_k]

  // 2. Each row's chosen checkpoints (union over heads), and the rounds they are read in.
  std::vector<RoutedRows> routed(entries.size());
  int rounds = 0;
  for (size_t j = 0; j < entries.size(); ++j) {
    const PieceEntry& e = entries[j];
    for (int64_t r = e.begin; r < e.end; ++r) {
      std::vector<int32_t> rows_choice;
      for (int64_t x = 0; x < hs * top_k; ++x) {
        const int32_t page = choice[(r - begin) * hs * top_k + x];
        if (page >= 0) rows_choice.push_back(page - key_base[j]);
      }
      std::sort(rows_choice.begin(), rows_choice.end());
      rows_choice.erase(std::unique(rows_choice.begin(), rows_choice.end()), rows_choice.end());
      routed[j].chosen.push_back(std::move(rows_choice));
    }
    const auto cps = store.Checkpoints(batch.slots[e.seq], layer_);
    rounds = std::max(rounds, AssignRounds(cps, store.options().hot_pages, routed[j]));
  }

  // 3. Per round: stage each sequence's chosen pages; rows of other rounds read none (y = o_on, and
  // out aliases the online read-out, so they keep what an earlier round wrote).
  for (int round = 0; round < rounds; ++round) {
    PageList list;
    std::vector<std::vector<int32_t>> page_of(entries.size());  // checkpoint → index into pages
    for (size_t j = 0; j < entries.size(); ++j) {
      const int slot = batch.slots[entries[j].seq];
      const auto cps = store.Checkpoints(slot, layer_);
      const std::span<const Tensor> slot_keys = store.PooledKeys(slot, layer_);
      std::vector<int32_t> wanted;
      for (size_t r = 0; r < routed[j].chosen.size(); ++r) {
        if (routed[j].round[r] != round) continue;
        wanted.insert(wanted.end(), routed[j].chosen[r].begin(), routed[j].chosen[r].end());
      }
      std::sort(wanted.begin(), wanted.end());
      wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
      MCSERVE_ASSIGN_OR_RETURN(std::vector<const Tensor*> memories, store.Stage(slot, layer_, wanted));
      page_of[j].assign(cps.size(), -1);
      for (size_t i = 0; i < wanted.size(); ++i) {
        page_of[j][wanted[i]] = static_cast<int32_t>(list.pages.size());
        list.pages.push_back({.memory = memories[i], .pooled_key = &slot_keys[wanted[i]]});
      }
    }
    for (size_t j = 0; j < entries.size(); ++j) {
      for (size_t r = 0; r < routed[j].chosen.size(); ++r) {
        if (routed[j].round[r] == round) {
          for (int32_t i : routed[j].chosen[r]) list.token_pages.push_back(page_of[j][i]);
        }
        list.offsets.push_back(static_cast<int32_t>(list.token_pages.size()));
      }
    }
    MCSERVE_RETURN_IF_ERROR(Readout(pass, rows, list, 0));
  }
  return absl::OkStatus();
}

}  // namespace mcserve::engine
