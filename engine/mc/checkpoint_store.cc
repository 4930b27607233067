#include "engine/mc/checkpoint_store.h"

#include "kernels/core/status_macros.h"

namespace mcserve::engine {

using kernels::Tensor;

std::vector<McCheckpoint>& LocalCheckpointStore::List(int slot, int layer) {
  const size_t index = static_cast<size_t>(slot) * num_layers_ + layer;
  MCSERVE_CHECK(slot >= 0 && layer >= 0 && layer < num_layers_ && index < lists_.size());
  return lists_[index];
}

absl::Status LocalCheckpointStore::Freeze(int slot, int layer, const Tensor& memory, const Tensor& pooled_key,
                                          const Segment& segment) {
  McCheckpoint cp;
  MCSERVE_ASSIGN_OR_RETURN(cp.memory, Tensor::Zeros(kernels::DType::kF32, memory.shape(), device_));
  MCSERVE_RETURN_IF_ERROR(cp.memory.CopyFrom(memory));
  MCSERVE_ASSIGN_OR_RETURN(cp.pooled_key, Tensor::Zeros(kernels::DType::kF32, pooled_key.shape(), device_));
  MCSERVE_RETURN_IF_ERROR(cp.pooled_key.CopyFrom(pooled_key));
  cp.segment = segment;
  bytes_ += cp.memory.nbytes() + cp.pooled_key.nbytes();
  List(slot, layer).push_back(std::move(cp));
  return absl::OkStatus();
}

std::span<const McCheckpoint> LocalCheckpointStore::Checkpoints(int slot, int layer) const {
  return const_cast<LocalCheckpointStore*>(this)->List(slot, layer);
}

void LocalCheckpointStore::DropNewest(int slot, int layer, int count) {
  std::vector<McCheckpoint>& list = List(slot, layer);
  for (; count > 0 && !list.empty(); --count) {
    bytes_ -= list.back().memory.nbytes() + list.back().pooled_key.nbytes();
    list.pop_back();
  }
}

void LocalCheckpointStore::Clear(int slot) {
  for (int layer = 0; layer < num_layers_; ++layer) DropNewest(slot, layer, static_cast<int>(List(slot, layer).size()));
}

}  // namespace mcserve::engine
