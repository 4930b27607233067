// StatePool: the per-request recurrent state of every layer, in fixed slots. Each layer owns named
// tensors of shape [num_slots, ...] (memory, conv windows, auxiliary vectors); a request holds one
// slot for its lifetime. The pool is the one owner of which slots are free and of each slot's token
// position, and holds the slots' Memory Caching checkpoints. Owned and mutated by the engine loop thread only.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "engine/mc/checkpoint_store.h"
#include "kernels/core/tensor.h"

namespace mcserve::engine {

// One state tensor a layer needs per slot, e.g. {"memory", {Hs, K, V}}.
struct StateSpec {
  std::string name;
  kernels::Shape per_slot;  // shape of one slot's part, without the leading [num_slots]
  // Scratch: per-slot working memory that is empty whenever the state is snapshotted (ARMT's
  // open-segment KV cache, empty right after a segment close). Prefix-cache snapshots skip it.
  bool scratch = false;
};

// The state tensors of one layer; each is [num_slots, ...per_slot] F32.
class LayerState {
 public:
  // The tensor registered under `name`; aborts if absent (a broken internal invariant).
  kernels::Tensor& at(const std::string& name);
  absl::flat_hash_map<std::string, kernels::Tensor>& tensors() { return tensors_; }
  // Whether tensor `name` is scratch (StateSpec::scratch): never snapshotted or restored.
  bool is_scratch(const std::string& name) const { return scratch_.contains(name); }
  void MarkScratch(const std::string& name) { scratch_.insert(name); }

 private:
  absl::flat_hash_map<std::string, kernels::Tensor> tensors_;
  absl::flat_hash_set<std::string> scratch_;
};

class StatePool {
 public:
  // Allocates num_slots slots for layers with the given specs, all zero, all free, and a checkpoint
  // store with the given tier budgets.
  static absl::StatusOr<StatePool> Create(const std::vector<std::vector<StateSpec>>& layer_specs,
                                          int num_slots, kernels::Device device,
                                          const CheckpointStoreOptions& checkpoints = {});

  int num_slots() const { return num_slots_; }
  int num_free() const { return num_free_; }
  // Whether `slot` is held (Acquire'd and not yet Released).
  bool in_use(int slot) const { return in_use_[slot]; }
  // Bytes of state per slot across all layers.
  int64_t bytes_per_slot() const { return bytes_per_slot_; }

  // Takes the lowest free slot and zeroes its state; ResourceExhausted when none is free.
  absl::StatusOr<int> Acquire();
  // Returns a slot to the free list.
  void Release(int slot);
  // Zeroes every layer's state of `slot`, its token count and its checkpoints (a fresh sequence).
  absl::Status Reset(int slot);

  LayerState& layer(int i) { return layers_[i]; }
  // Tokens `slot` has processed since its last Reset.
  int64_t position(int slot) const { return positions_[slot]; }
  void Advance(int slot, int64_t tokens) { positions_[slot] += tokens; }
  // Segments `slot` has closed since its last Reset (ARMT: the writes of its associative memory).
  int64_t closed_segments(int slot) const { return closed_segments_[slot]; }
  void CloseSegment(int slot) { ++closed_segments_[slot]; }
  // Restores a slot's counters (a prefix-cache resume): `position` tokens run, `closed` segments.
  void SetProgress(int slot, int64_t position, int64_t closed) {
    positions_[slot] = position;
    closed_segments_[slot] = closed;
  }
  CheckpointStore& checkpoints() { return *checkpoints_; }
  const CheckpointStore& checkpoints() const { return *checkpoints_; }

 private:
  std::vector<LayerState> layers_;
  std::vector<int64_t> positions_;
  std::vector<int64_t> closed_segments_;
  std::unique_ptr<CheckpointStore> checkpoints_;
  std::vector<bool> in_use_;  // [num_slots]
  int num_free_ = 0;
  int num_slots_ = 0;
  int64_t bytes_per_slot_ = 0;
};

// Zeroes slot `slot` (row `slot` of the leading dimension) of a [num_slots, ...] state tensor.
absl::Status ZeroSlot(kernels::Tensor& t, int slot);

}  // namespace mcserve::engine
