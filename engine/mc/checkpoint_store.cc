#include "engine/mc/checkpoint_store.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "kernels/core/status_macros.h"

namespace mcserve::engine {

using kernels::Tensor;

namespace {

bool Fits(int64_t budget, int64_t used, int64_t bytes) { return budget < 0 || used + bytes <= budget; }

std::string Budget(int64_t bytes) { return bytes < 0 ? std::string("unlimited") : absl::StrCat(bytes, " bytes"); }

}  // namespace

CheckpointStore::CheckpointStore(int num_slots, int num_layers, kernels::Device device, CheckpointStoreOptions options)
    : lists_(static_cast<size_t>(num_slots) * num_layers),
      hot_(static_cast<size_t>(num_slots) * num_layers),
      num_layers_(num_layers),
      device_(device),
      options_(options) {}

CheckpointStore::List& CheckpointStore::ListOf(int slot, int layer) {
  const size_t index = static_cast<size_t>(slot) * num_layers_ + layer;
  MCSERVE_CHECK(slot >= 0 && layer >= 0 && layer < num_layers_ && index < lists_.size());
  return lists_[index];
}

const CheckpointStore::List& CheckpointStore::ListOf(int slot, int layer) const {
  return const_cast<CheckpointStore*>(this)->ListOf(slot, layer);
}

std::list<CheckpointStore::HotEntry>& CheckpointStore::HotOf(int slot, int layer) {
  ListOf(slot, layer);  // bounds check
  return hot_[static_cast<size_t>(slot) * num_layers_ + layer];
}

absl::Status CheckpointStore::Freeze(int slot, int layer, const Tensor& memory, const Tensor& pooled_key,
                                     const Segment& segment) {
  const int64_t device_memory = device_memory_bytes_;
  CheckpointTier tier = CheckpointTier::kDevice;
  if (!Fits(options_.device_bytes, device_memory, memory.nbytes())) {
    if (!Fits(options_.host_bytes, stats_.host_bytes, memory.nbytes())) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "checkpoint store full: a ", memory.nbytes(), "-byte page of layer ", layer, " fits neither the device tier (",
          device_memory, " of ", Budget(options_.device_bytes), " used) nor the host tier (", stats_.host_bytes,
          " of ", Budget(options_.host_bytes), " used)"));
    }
    tier = CheckpointTier::kHost;
  }
  McCheckpoint cp{.segment = segment, .tier = tier, .id = next_id_++};
  const kernels::Device where = tier == CheckpointTier::kDevice ? device_ : kernels::Device::kCpu;
  MCSERVE_ASSIGN_OR_RETURN(cp.memory, Tensor::Zeros(kernels::DType::kF32, memory.shape(), where));
  MCSERVE_RETURN_IF_ERROR(cp.memory.CopyFrom(memory));
  MCSERVE_ASSIGN_OR_RETURN(cp.pooled_key, Tensor::Zeros(kernels::DType::kF32, pooled_key.shape(), device_));
  MCSERVE_RETURN_IF_ERROR(cp.pooled_key.CopyFrom(pooled_key));
  List& list = ListOf(slot, layer);
  stats_.device_bytes += cp.pooled_key.nbytes();
  if (tier == CheckpointTier::kDevice) {
    stats_.device_bytes += cp.memory.nbytes();
    device_memory_bytes_ += cp.memory.nbytes();
    ++stats_.device_pages;
  } else {
    stats_.host_bytes += cp.memory.nbytes();
    ++stats_.host_pages;
    ++list.host_pages;
  }
  list.checkpoints.push_back(std::move(cp));
  return absl::OkStatus();
}

std::span<const McCheckpoint> CheckpointStore::Checkpoints(int slot, int layer) const {
  return ListOf(slot, layer).checkpoints;
}

bool CheckpointStore::AllOnDevice(int slot, int layer) const { return ListOf(slot, layer).host_pages == 0; }

absl::StatusOr<std::vector<const Tensor*>> CheckpointStore::Stage(int slot, int layer,
                                                                   std::span<const int32_t> indices) {
  const List& list = ListOf(slot, layer);
  std::list<HotEntry>& hot = HotOf(slot, layer);
  ++stage_calls_;
  std::vector<const Tensor*> out;
  out.reserve(indices.size());
  size_t staged_now = 0;
  for (int32_t i : indices) {
    if (i < 0 || i >= static_cast<int32_t>(list.checkpoints.size())) {
      return absl::OutOfRangeError(absl::StrCat("Stage: checkpoint ", i, " of slot ", slot, " layer ", layer,
                                                " (it has ", list.checkpoints.size(), ")"));
    }
    const McCheckpoint& cp = list.checkpoints[i];
    if (cp.tier == CheckpointTier::kDevice) {
      out.push_back(&cp.memory);
      continue;
    }
    MCSERVE_ASSIGN_OR_RETURN(const Tensor* staged, StageOne(hot, cp));
    out.push_back(staged);
    ++staged_now;
  }
  TrimHot(hot, std::max<size_t>(static_cast<size_t>(std::max(options_.hot_pages, 0)), staged_now));
  return out;
}

absl::StatusOr<const Tensor*> CheckpointStore::StageOne(std::list<HotEntry>& hot, const McCheckpoint& cp) {
  for (auto it = hot.begin(); it != hot.end(); ++it) {
    if (it->id != cp.id) continue;
    if (it->last_call != stage_calls_) ++stats_.hot_hits;
    it->last_call = stage_calls_;
    hot.splice(hot.begin(), hot, it);  // most recently used first
    return &hot.front().memory;
  }
  Tensor buffer;
  auto spare = std::find_if(spare_.begin(), spare_.end(), [&](const Tensor& t) { return t.shape() == cp.memory.shape(); });
  if (spare != spare_.end()) {
    buffer = std::move(*spare);
    spare_.erase(spare);
  } else {
    MCSERVE_ASSIGN_OR_RETURN(buffer, Tensor::Zeros(kernels::DType::kF32, cp.memory.shape(), device_));
  }
  MCSERVE_RETURN_IF_ERROR(buffer.CopyFrom(cp.memory));  // host → device
  ++stats_.stagings;
  ++stats_.hot_pages;
  stats_.hot_bytes += buffer.nbytes();
  hot.push_front({cp.id, std::move(buffer), stage_calls_});
  return &hot.front().memory;
}

void CheckpointStore::TrimHot(std::list<HotEntry>& hot, size_t keep) {
  while (hot.size() > keep && hot.back().last_call != stage_calls_) {
    --stats_.hot_pages;
    stats_.hot_bytes -= hot.back().memory.nbytes();
    // Keep a few buffers for reuse; the rest go back to the device allocator's cache.
    if (spare_.size() < 8) spare_.push_back(std::move(hot.back().memory));
    hot.pop_back();
  }
}

void CheckpointStore::Forget(std::list<HotEntry>& hot, uint64_t id) {
  for (auto it = hot.begin(); it != hot.end(); ++it) {
    if (it->id != id) continue;
    --stats_.hot_pages;
    stats_.hot_bytes -= it->memory.nbytes();
    hot.erase(it);
    return;
  }
}

void CheckpointStore::DropNewest(int slot, int layer, int count) {
  List& list = ListOf(slot, layer);
  std::list<HotEntry>& hot = HotOf(slot, layer);
  for (; count > 0 && !list.checkpoints.empty(); --count) {
    const McCheckpoint& cp = list.checkpoints.back();
    stats_.device_bytes -= cp.pooled_key.nbytes();
    if (cp.tier == CheckpointTier::kDevice) {
      stats_.device_bytes -= cp.memory.nbytes();
      device_memory_bytes_ -= cp.memory.nbytes();
      --stats_.device_pages;
    } else {
      stats_.host_bytes -= cp.memory.nbytes();
      --stats_.host_pages;
      --list.host_pages;
      Forget(hot, cp.id);
    }
    list.checkpoints.pop_back();
  }
}

void CheckpointStore::Clear(int slot) {
  for (int layer = 0; layer < num_layers_; ++layer) {
    DropNewest(slot, layer, static_cast<int>(ListOf(slot, layer).checkpoints.size()));
  }
}

}  // namespace mcserve::engine
