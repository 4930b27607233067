// CheckpointStore: where Memory Caching keeps the frozen memories of closed segments, per request
// slot and layer, with their pooled keys. This is the interface the serving engine's paged store
// (device + host tiers, prefix reuse) implements; LocalCheckpointStore keeps them in plain tensors
// on the model's device. Scheduler thread only.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "engine/mc/segmentation.h"
#include "kernels/core/tensor.h"

namespace mcserve::engine {

// One frozen memory: a checkpoint of one layer for one segment. Immutable once frozen.
struct McCheckpoint {
  kernels::Tensor memory;      // [Hs, K, V] F32 (the memory matrix only; never momentum)
  kernels::Tensor pooled_key;  // [Hs, K] F32
  Segment segment;             // the tokens it covers
};

class CheckpointStore {
 public:
  virtual ~CheckpointStore() = default;
  // Copies `memory` [Hs, K, V] and `pooled_key` [Hs, K] into a new newest checkpoint of (slot, layer).
  virtual absl::Status Freeze(int slot, int layer, const kernels::Tensor& memory, const kernels::Tensor& pooled_key,
                              const Segment& segment) = 0;
  // The checkpoints of (slot, layer), oldest first. Valid until the next Freeze/Drop/Clear.
  virtual std::span<const McCheckpoint> Checkpoints(int slot, int layer) const = 0;
  // Drops the newest `count` checkpoints of (slot, layer) (logarithmic segmentation's pops).
  virtual void DropNewest(int slot, int layer, int count) = 0;
  // Forgets every checkpoint of `slot` (its request ended, or the slot starts a new sequence).
  virtual void Clear(int slot) = 0;
  // Bytes held by all checkpoints.
  virtual int64_t bytes() const = 0;
};

// In-memory store: one growing list per (slot, layer), tensors on `device`.
class LocalCheckpointStore : public CheckpointStore {
 public:
  LocalCheckpointStore(int num_slots, int num_layers, kernels::Device device)
      : lists_(static_cast<size_t>(num_slots) * num_layers), num_layers_(num_layers), device_(device) {}

  absl::Status Freeze(int slot, int layer, const kernels::Tensor& memory, const kernels::Tensor& pooled_key,
                      const Segment& segment) override;
  std::span<const McCheckpoint> Checkpoints(int slot, int layer) const override;
  void DropNewest(int slot, int layer, int count) override;
  void Clear(int slot) override;
  int64_t bytes() const override { return bytes_; }

 private:
  std::vector<McCheckpoint>& List(int slot, int layer);
  std::vector<std::vector<McCheckpoint>> lists_;  // [slot · num_layers + layer]
  int num_layers_;
  kernels::Device device_;
  int64_t bytes_ = 0;
};

}  // namespace mcserve::engine
