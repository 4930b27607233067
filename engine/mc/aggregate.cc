// The read-out of rows against their slots' checkpoints (memory_stage.h): the page list each row
// reads — every page, staged to the device, or a slot's running sum — then the rule's Read. SSC with
// pages on the host routes first (ssc_routed.cc).
#include <vector>

#include "base/status_macros.h"
#include "engine/mc/mc_pass.h"
#include "engine/mc/segmentation.h"

namespace mcserve::engine {

using kernels::Tensor;

namespace {

// Storage of Aggregate's lists, kept per thread across calls (the engine loop thread's).
struct AggregateScratch {
  std::vector<Tensor> sums;
  PageList list;
  std::vector<int32_t> all;
};

}  // namespace

// Appends every checkpoint of (slot, layer) = cps to list.pages: in place when all are on the device,
// else staged to the device (CheckpointStore::Stage). `all` is index scratch.
absl::Status MemoryStage::AppendPages(CheckpointStore& store, int slot, CheckpointList cps,
                                      std::vector<int32_t>& all, PageList& list) const {
  // Side by side, in cps's order: the page objects are not touched.
  const std::span<const Tensor> keys = store.PooledKeys(slot, layer_);
  if (store.AllOnDevice(slot, layer_)) {
    const std::span<const Tensor> memories = store.Memories(slot, layer_);
    for (size_t i = 0; i < cps.size(); ++i) list.pages.push_back({.memory = &memories[i], .pooled_key = &keys[i]});
    return absl::OkStatus();
  }
  all.resize(cps.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int32_t>(i);
  MCSERVE_ASSIGN_OR_RETURN(std::vector<const Tensor*> staged, store.Stage(slot, layer_, all));
  for (size_t i = 0; i < cps.size(); ++i) list.pages.push_back({.memory = staged[i], .pooled_key = &keys[i]});
  return absl::OkStatus();
}

absl::Status MemoryStage::Aggregate(const McPass& pass, const SubBatch& rows) const {
  const MixerBatch& batch = pass.batch;
  const bool summed = SumsCheckpoints();
  CheckpointStore& store = *batch.checkpoints;
  if (mc_->aggregation == McAggregation::kSsc) {
    for (const PieceEntry& e : rows.entries()) {
      if (!store.AllOnDevice(batch.slots[e.seq], layer_)) return AggregateRouted(pass, rows);
    }
  }
  // The lists are rebuilt per call in storage kept across calls: a decode step allocates nothing.
  thread_local AggregateScratch scratch;
  std::vector<Tensor>& sums = scratch.sums;  // the slots' running sums (summed aggregations), stable below
  PageList& list = scratch.list;
  sums.clear();
  sums.reserve(rows.entries().size());
  list.pages.clear();
  list.offsets.assign(1, 0);
  list.token_pages.clear();
  size_t cached = 0;  // checkpoints of the (last) entry's slot
  for (const PieceEntry& e : rows.entries()) {
    const int slot = batch.slots[e.seq];
    const CheckpointList cps = store.Checkpoints(slot, layer_);
    // Summed aggregations keep only the running sum; the closed-segment count follows from the position.
    cached = summed ? static_cast<size_t>(CachedSegments(batch.positions[e.seq] + (e.begin - batch.cu[e.seq]) + 1,
                                                         mc_->segment_size))
                    : cps.size();
    const int32_t first = static_cast<int32_t>(list.pages.size());
    if (summed && cached > 0) {
      MCSERVE_ASSIGN_OR_RETURN(Tensor sum, pass.state.at("mc_sum").Rows(slot, slot + 1).Reshape(PageShape()));
      sums.push_back(std::move(sum));
      list.pages.push_back({.memory = &sums.back()});
    } else if (!summed) {
      MCSERVE_RETURN_IF_ERROR(AppendPages(store, slot, cps, scratch.all, list));
    }
    const int32_t last = static_cast<int32_t>(list.pages.size());
    for (int64_t r = e.begin; r < e.end; ++r) {
      for (int32_t id = first; id < last; ++id) list.token_pages.push_back(id);
      list.offsets.push_back(static_cast<int32_t>(list.token_pages.size()));
    }
  }
  const absl::Status status = Readout(pass, rows, list, cached);
  sums.clear();  // drop the views of the state
  return status;
}

absl::Status MemoryStage::Readout(const McPass& pass, const SubBatch& rows, const PageList& list,
                                  size_t cached) const {
  const kernels::Context& ctx = pass.ctx;
  MCSERVE_ASSIGN_OR_RETURN(
      Tensor offsets_t, Tensor::FromHostI32(list.offsets, {static_cast<int64_t>(list.offsets.size())}, ctx.device));
  MCSERVE_ASSIGN_OR_RETURN(Tensor pages_t, Tensor::FromHostI32(list.token_pages,
                                                               {static_cast<int64_t>(list.token_pages.size())},
                                                               ctx.device));
  const int64_t begin = rows.begin(), end = rows.end();
  Tensor q_rows = pass.q.Rows(begin, end), u_rows = pass.u.Rows(begin, end), pool_rows = pass.pools.Rows(begin, end);
  Tensor out_rows = pass.out->Rows(begin, end);
  return pass.rule.Read(ctx, {.mc = &*mc_, .cached = cached, .q = &q_rows, .u = &u_rows, .pools = &pool_rows,
                              .pages = list.pages, .offsets = &offsets_t, .token_pages = &pages_t,
                              .layout = rows.layout(), .state = &pass.state, .out = &out_rows});
}

}  // namespace mcserve::engine
