#include "engine/runner/state_pool.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace mcserve::engine {

using kernels::Tensor;

Tensor& LayerState::at(const std::string& name) {
  auto it = tensors_.find(name);
  MCSERVE_CHECK(it != tensors_.end());
  return it->second;
}

absl::StatusOr<StatePool> StatePool::Create(const std::vector<std::vector<StateSpec>>& layer_specs,
                                            int num_slots, kernels::Device device,
                                            const CheckpointStoreOptions& checkpoints) {
  if (num_slots <= 0) return absl::InvalidArgumentError(absl::StrCat("state pool needs slots, got ", num_slots));
  StatePool pool;
  pool.num_slots_ = num_slots;
  pool.layers_.resize(layer_specs.size());
  for (size_t l = 0; l < layer_specs.size(); ++l) {
    for (const StateSpec& spec : layer_specs[l]) {
      kernels::Shape shape = spec.per_slot;
      shape.insert(shape.begin(), num_slots);
      MCSERVE_ASSIGN_OR_RETURN(Tensor t, Tensor::Zeros(kernels::DType::kF32, shape, device));
      pool.bytes_per_slot_ += t.nbytes() / num_slots;
      pool.layers_[l].tensors().emplace(spec.name, std::move(t));
      if (spec.scratch) pool.layers_[l].MarkScratch(spec.name);
    }
  }
  pool.in_use_.assign(num_slots, false);
  pool.num_free_ = num_slots;
  pool.positions_.assign(num_slots, 0);
  pool.closed_segments_.assign(num_slots, 0);
  pool.checkpoints_ = std::make_unique<CheckpointStore>(num_slots, static_cast<int>(layer_specs.size()), device,
                                                       checkpoints);
  return pool;
}

absl::StatusOr<int> StatePool::Acquire() {
  const auto it = std::find(in_use_.begin(), in_use_.end(), false);
  if (it == in_use_.end()) {
    return absl::ResourceExhaustedError(absl::StrCat("all ", num_slots_, " state slots are in use"));
  }
  const int slot = static_cast<int>(it - in_use_.begin());
  MCSERVE_RETURN_IF_ERROR(Reset(slot));
  in_use_[slot] = true;
  --num_free_;
  return slot;
}

void StatePool::Release(int slot) {
  MCSERVE_CHECK(slot >= 0 && slot < num_slots_);
  MCSERVE_CHECK(in_use_[slot]);
  in_use_[slot] = false;
  ++num_free_;
}

absl::Status StatePool::Reset(int slot) {
  for (LayerState& layer : layers_) {
    for (auto& [name, tensor] : layer.tensors()) MCSERVE_RETURN_IF_ERROR(ZeroSlot(tensor, slot));
  }
  positions_[slot] = 0;
  closed_segments_[slot] = 0;
  checkpoints_->Clear(slot);
  return absl::OkStatus();
}

absl::Status ZeroSlot(Tensor& t, int slot) {
  Tensor row = t.Rows(slot, slot + 1);
  return row.CopyFromHost(std::vector<float>(row.numel(), 0.0f));
}

}  // namespace mcserve::engine
