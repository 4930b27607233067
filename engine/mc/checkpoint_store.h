// CheckpointStore: the paged store of Memory Caching's frozen memories. A page is one layer's
// memory at the end of one closed segment plus its pooled key; pages are immutable and shared:
// each request slot holds, per layer, a list of pages (its running references), and the prefix
// cache may hold more references (index references) so that a later request with the same prompt
// prefix adopts them instead of recomputing. A page is freed when neither references it.
//
// Two tiers with byte budgets: the device tier (where kernels read) and the host tier (RAM). Pooled
// keys always live on the device, so the SSC router can score every page; a memory on the host tier
// is staged into a small per-(slot, layer) device hot set (LRU) when a read-out needs it. Each
// (slot, layer) list also keeps its pages' pooled keys side by side (PooledKeyBlock) and views of their
// memories in one array, which is what the read-outs and the router are handed: a decode step at 64K
// tokens lists 256 pages per layer, and the page objects themselves lie scattered over the heap. When both
// tiers are full a Freeze fails with RESOURCE_EXHAUSTED; the store never calls back up: its owner
// (RecurrentRunner) asks HasRoomFor before a forward pass and drops prefix-cache entries (releasing
// their index references) until the pass's pages fit. On the CPU backend both tiers are RAM, with
// the same accounting and staging. Engine loop thread only.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "engine/mc/pooled_key_block.h"
#include "engine/mc/segmentation.h"
#include "kernels/core/tensor.h"

namespace mcserve::engine {

// Where a checkpoint's memory lives.
enum class CheckpointTier { kDevice, kHost };

struct CheckpointStoreOptions {
  int64_t device_bytes = -1;  // budget of checkpoint memories on the device tier (pooled keys, always on
                              // the device, are not counted against it); -1 = unlimited
  int64_t host_bytes = -1;    // budget of the host tier; -1 = unlimited
  int hot_pages = 32;         // staged host pages kept on the device per (slot, layer) between steps
};

// A tier budget given in MiB (fractions allowed; -1 = unlimited) in bytes; InvalidArgument otherwise.
absl::StatusOr<int64_t> BudgetBytesFromMib(double mib);

// One page: a checkpoint of one layer for one segment. Immutable once frozen (but for its counts).
struct McCheckpoint {
  kernels::Tensor memory;      // [Hs, K, V] F32 (the memory matrix only); on the device or the host
  kernels::Tensor pooled_key;  // [Hs, K] F32, always on the device
  Segment segment;             // the tokens it covers
  CheckpointTier tier = CheckpointTier::kDevice;
  uint64_t id = 0;             // unique over the store's lifetime
  int running_refs = 0;        // slot lists holding it
  int index_refs = 0;          // prefix-cache entries holding it
};

// A slot's pages of one layer, oldest first.
using CheckpointList = std::span<const McCheckpoint* const>;

// Counters for metrics and tests.
struct CheckpointStoreStats {
  int64_t device_pages = 0, host_pages = 0;  // pages per tier
  int64_t device_bytes = 0, host_bytes = 0;  // memory bytes per tier (pooled keys: device_bytes)
  int64_t referenced_pages = 0;              // pages some slot holds
  int64_t hot_pages = 0, hot_bytes = 0;      // staged copies currently held on the device
  int64_t key_block_bytes = 0;               // the lists' side-by-side pooled keys (PooledKeyBlock), on the device
  int64_t stagings = 0;                      // host → device page copies so far
  int64_t hot_hits = 0;                      // host pages a read-out found already staged
};

class CheckpointStore {
 public:
  // Slots × layers lists; `device` is the model's device (the device tier's and the hot sets').
  CheckpointStore(int num_slots, int num_layers, kernels::Device device, CheckpointStoreOptions options = {});
  ~CheckpointStore();
  CheckpointStore(const CheckpointStore&) = delete;
  CheckpointStore& operator=(const CheckpointStore&) = delete;

  // Copies `memory` [Hs, K, V] and `pooled_key` [Hs, K] (both on the device) into a new page appended
  // to (slot, layer)'s list: on the device tier while its budget allows, else on the host tier;
  // ResourceExhausted naming both budgets when neither has room.
  absl::Status Freeze(int slot, int layer, const kernels::Tensor& memory, const kernels::Tensor& pooled_key,
                      const Segment& segment);
  // The pages of (slot, layer), oldest first. Valid until the next change of that list.
  CheckpointList Checkpoints(int slot, int layer) const;
  // The pooled keys [Hs, K] of Checkpoints(slot, layer), in the same order, as views of one contiguous
  // device buffer. Valid until the next change of that list.
  std::span<const kernels::Tensor> PooledKeys(int slot, int layer) const;
  // Views of the memories [Hs, K, V] of Checkpoints(slot, layer), in the same order, side by side (on
  // each page's tier: only device-tier ones may be read in place). Valid until the next change of that list.
  std::span<const kernels::Tensor> Memories(int slot, int layer) const;
  // Device-resident memories [Hs, K, V] of pages `indices` (into Checkpoints(slot, layer)): the device
  // tier's own tensors, or copies of host pages staged into the (slot, layer) hot set. Pages of this
  // call are never evicted by it; afterwards the hot set is trimmed to hot_pages (LRU). Pointers are
  // valid until the next Stage/Freeze/DropNewest/Clear/Adopt of the same (slot, layer).
  absl::StatusOr<std::vector<const kernels::Tensor*>> Stage(int slot, int layer, std::span<const int32_t> indices);
  // Whether every page of (slot, layer) is on the device tier.
  bool AllOnDevice(int slot, int layer) const;
  // Drops the newest `count` pages of (slot, layer) (logarithmic segmentation's pops).
  void DropNewest(int slot, int layer, int count);
  // Empties every list of `slot` (its request ended, or the slot starts a new sequence).
  void Clear(int slot);

  // Prefix reuse. Makes (slot, layer)'s list — which must be empty — the given pages; on an error
  // (copying their pooled keys) the list stays empty.
  absl::Status Adopt(int slot, int layer, CheckpointList pages);
  // An index reference: the page stays alive (and evictable only through its holder) until Release.
  void Retain(const McCheckpoint* page);
  void Release(const McCheckpoint* page);
  // Whether new pages with these memory sizes (bytes each, frozen in this order) would all find a
  // tier now, placed as Freeze places them (the device tier first, then the host tier).
  bool HasRoomFor(std::span<const int64_t> page_bytes) const;

  // Recounts every page's references from the lists, and every tier's pages and bytes, against the
  // recorded counts; Internal error naming the first mismatch. Index references are checked by their
  // holder. For tests and debug builds.
  absl::Status SanityCheck() const;

  const CheckpointStoreOptions& options() const { return options_; }
  CheckpointStoreStats stats() const;
  // Bytes held by all pages on both tiers (memories and pooled keys) and by the lists' side-by-side
  // copies of the keys (not the hot sets).
  int64_t bytes() const { return stats_.device_bytes + stats_.host_bytes + stats_.key_block_bytes; }

 private:
  struct List {
    std::vector<McCheckpoint*> pages;
    int host_pages = 0;
    PooledKeyBlock keys;                   // pages[i]'s pooled key at row i
    std::vector<kernels::Tensor> memories;  // [pages] views of pages[i]->memory
  };
  struct HotEntry {
    uint64_t id;             // the page it copies
    kernels::Tensor memory;  // [Hs, K, V] F32 on the device
    uint64_t last_call;      // the Stage call that last used it
  };
  List& ListOf(int slot, int layer);
  const List& ListOf(int slot, int layer) const;
  std::list<HotEntry>& HotOf(int slot, int layer);
  absl::StatusOr<CheckpointTier> PlaceTier(int layer, int64_t bytes);
  absl::StatusOr<const kernels::Tensor*> StageOne(std::list<HotEntry>& hot, const McCheckpoint& cp);
  void TrimHot(std::list<HotEntry>& hot, size_t keep);
  void Forget(std::list<HotEntry>& hot, uint64_t id);
  absl::Status Push(List& list, McCheckpoint* page);
  void Pop(List& list, std::list<HotEntry>& hot);
  void FreeIfUnused(McCheckpoint* page);

  absl::flat_hash_map<uint64_t, std::unique_ptr<McCheckpoint>> pages_;  // every live page by id
  std::vector<List> lists_;                                             // [slot · num_layers + layer]
  std::vector<std::list<HotEntry>> hot_;  // [slot · num_layers + layer], most recently used first
  std::vector<kernels::Tensor> spare_;    // evicted hot buffers, reused by shape
  int num_layers_;
  kernels::Device device_;
  CheckpointStoreOptions options_;
  CheckpointStoreStats stats_;
  int64_t device_memory_bytes_ = 0;  // device-tier memories (what device_bytes budgets)
  uint64_t next_id_ = 1;
  uint64_t stage_calls_ = 0;
};

}  // namespace mcserve::engine
