// CheckpointStore: where Memory Caching keeps the frozen memories of closed segments, per request
// slot and layer, with their pooled keys, in two tiers with byte budgets: the device tier (where
// kernels read) and the host tier (RAM). Pooled keys always live on the device, so the SSC router can
// score every page; a memory on the host tier is staged into a small per-(slot, layer) device hot
// set (LRU) when a read-out needs it. On the CPU backend both tiers are RAM, with the same accounting
// and staging. Scheduler thread only.
#pragma once

#include <cstdint>
#include <list>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
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

// One frozen memory: a checkpoint of one layer for one segment. Immutable once frozen.
struct McCheckpoint {
  kernels::Tensor memory;      // [Hs, K, V] F32 (the memory matrix only); on the device or the host
  kernels::Tensor pooled_key;  // [Hs, K] F32, always on the device
  Segment segment;             // the tokens it covers
  CheckpointTier tier = CheckpointTier::kDevice;
  uint64_t id = 0;             // unique over the store's lifetime (hot-set key)
};

// Counters for metrics and tests.
struct CheckpointStoreStats {
  int64_t device_pages = 0, host_pages = 0;  // checkpoints per tier
  int64_t device_bytes = 0, host_bytes = 0;  // memory bytes per tier (pooled keys: device_bytes)
  int64_t hot_pages = 0, hot_bytes = 0;      // staged copies currently held on the device
  int64_t stagings = 0;                      // host → device page copies so far
  int64_t hot_hits = 0;                      // host pages a read-out found already staged
};

class CheckpointStore {
 public:
  // Slots × layers lists; `device` is the model's device (the device tier's and the hot sets').
  CheckpointStore(int num_slots, int num_layers, kernels::Device device, CheckpointStoreOptions options = {});

  // Copies `memory` [Hs, K, V] and `pooled_key` [Hs, K] (both on the device) into a new newest
  // checkpoint of (slot, layer): on the device tier while its budget allows, else on the host tier;
  // ResourceExhausted naming both budgets when neither has room.
  absl::Status Freeze(int slot, int layer, const kernels::Tensor& memory, const kernels::Tensor& pooled_key,
                      const Segment& segment);
  // The checkpoints of (slot, layer), oldest first. Valid until the next Freeze/Drop/Clear.
  std::span<const McCheckpoint> Checkpoints(int slot, int layer) const;
  // Device-resident memories [Hs, K, V] of checkpoints `indices` (into Checkpoints(slot, layer)):
  // the device tier's own tensors, or copies of host pages staged into the (slot, layer) hot set.
  // Pages of this call are never evicted by it; afterwards the hot set is trimmed to hot_pages (LRU).
  // Pointers are valid until the next Stage/Freeze/DropNewest/Clear of the same (slot, layer).
  absl::StatusOr<std::vector<const kernels::Tensor*>> Stage(int slot, int layer, std::span<const int32_t> indices);
  // Whether every checkpoint of (slot, layer) is on the device tier.
  bool AllOnDevice(int slot, int layer) const;
  // Drops the newest `count` checkpoints of (slot, layer) (logarithmic segmentation's pops).
  void DropNewest(int slot, int layer, int count);
  // Forgets every checkpoint of `slot` (its request ended, or the slot starts a new sequence).
  void Clear(int slot);

  const CheckpointStoreOptions& options() const { return options_; }
  CheckpointStoreStats stats() const { return stats_; }
  // Bytes held by all checkpoints on both tiers (memories and pooled keys; not the hot sets).
  int64_t bytes() const { return stats_.device_bytes + stats_.host_bytes; }

 private:
  struct List {
    std::vector<McCheckpoint> checkpoints;
    int host_pages = 0;
  };
  struct HotEntry {
    uint64_t id;             // the checkpoint it copies
    kernels::Tensor memory;  // [Hs, K, V] F32 on the device
    uint64_t last_call;      // the Stage call that last used it
  };
  List& ListOf(int slot, int layer);
  const List& ListOf(int slot, int layer) const;
  std::list<HotEntry>& HotOf(int slot, int layer);
  absl::StatusOr<const kernels::Tensor*> StageOne(std::list<HotEntry>& hot, const McCheckpoint& cp);
  void TrimHot(std::list<HotEntry>& hot, size_t keep);
  void Forget(std::list<HotEntry>& hot, uint64_t id);

  std::vector<List> lists_;                // [slot · num_layers + layer]
  std::vector<std::list<HotEntry>> hot_;  // [slot · num_layers + layer], most recently used first
  std::vector<kernels::Tensor> spare_;     // evicted hot buffers, reused by shape
  int num_layers_;
  kernels::Device device_;
  CheckpointStoreOptions options_;
  CheckpointStoreStats stats_;
  int64_t device_memory_bytes_ = 0;  // device-tier memories (what device_bytes budgets)
  uint64_t next_id_ = 1;
  uint64_t stage_calls_ = 0;
};

}  // namespace mcserve::engine
