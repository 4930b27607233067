#include "engine/mc/checkpoint_store.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace mcserve::engine {

using kernels::Tensor;

namespace {

bool Fits(int64_t budget, int64_t used, int64_t bytes) { return budget < 0 || used + bytes <= budget; }

std::string Budget(int64_t bytes) { return bytes < 0 ? std::string("unlimited") : absl::StrCat(bytes, " bytes"); }

}  // namespace

absl::StatusOr<int64_t> BudgetBytesFromMib(double mib) {
  if (mib == -1) return -1;
  if (!(mib >= 0 && mib < 1e9)) return absl::InvalidArgumentError(absl::StrCat(mib, " is not a size in MiB (or -1)"));
  return static_cast<int64_t>(mib * 1024 * 1024);
}

CheckpointStore::CheckpointStore(int num_slots, int num_layers, kernels::Device device, CheckpointStoreOptions options)
    : lists_(static_cast<size_t>(num_slots) * num_layers),
      hot_(static_cast<size_t>(num_slots) * num_layers),
      num_layers_(num_layers),
      device_(device),
      options_(options) {}

CheckpointStore::~CheckpointStore() = default;

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

bool CheckpointStore::HasRoomFor(std::span<const int64_t> page_bytes) const {
  int64_t device = device_memory_bytes_, host = stats_.host_bytes;
  for (const int64_t bytes : page_bytes) {
    if (Fits(options_.device_bytes, device, bytes)) {
      device += bytes;
    } else if (Fits(options_.host_bytes, host, bytes)) {
      host += bytes;
    } else {
      return false;
    }
  }
  return true;
}

absl::StatusOr<CheckpointTier> CheckpointStore::PlaceTier(int layer, int64_t bytes) {
  if (Fits(options_.device_bytes, device_memory_bytes_, bytes)) return CheckpointTier::kDevice;
  if (Fits(options_.host_bytes, stats_.host_bytes, bytes)) return CheckpointTier::kHost;
  return absl::ResourceExhaustedError(absl::StrCat(
      "checkpoint store full: a ", bytes, "-byte page of layer ", layer, " fits neither the device tier (",
      device_memory_bytes_, " of ", Budget(options_.device_bytes), " used) nor the host tier (", stats_.host_bytes,
      " of ", Budget(options_.host_bytes), " used)"));
}

absl::Status CheckpointStore::Freeze(int slot, int layer, const Tensor& memory, const Tensor& pooled_key,
                                     const Segment& segment) {
  ListOf(slot, layer);  // bounds check before anything is allocated
  MCSERVE_ASSIGN_OR_RETURN(const CheckpointTier tier, PlaceTier(layer, memory.nbytes()));
  auto page = std::make_unique<McCheckpoint>();
  page->segment = segment;
  page->tier = tier;
  page->id = next_id_++;
  const kernels::Device where = tier == CheckpointTier::kDevice ? device_ : kernels::Device::kCpu;
  MCSERVE_ASSIGN_OR_RETURN(page->memory, Tensor::Zeros(kernels::DType::kF32, memory.shape(), where));
  MCSERVE_RETURN_IF_ERROR(page->memory.CopyFrom(memory));
  MCSERVE_ASSIGN_OR_RETURN(page->pooled_key, Tensor::Zeros(kernels::DType::kF32, pooled_key.shape(), device_));
  MCSERVE_RETURN_IF_ERROR(page->pooled_key.CopyFrom(pooled_key));
  McCheckpoint* raw = page.get();
  MCSERVE_RETURN_IF_ERROR(Push(ListOf(slot, layer), raw));
  stats_.device_bytes += page->pooled_key.nbytes();
  if (tier == CheckpointTier::kDevice) {
    stats_.device_bytes += page->memory.nbytes();
    device_memory_bytes_ += page->memory.nbytes();
    ++stats_.device_pages;
  } else {
    stats_.host_bytes += page->memory.nbytes();
    ++stats_.host_pages;
  }
  pages_.emplace(raw->id, std::move(page));
  return absl::OkStatus();
}

absl::Status CheckpointStore::Push(List& list, McCheckpoint* page) {
  const int64_t before = list.keys.capacity_bytes();
  const absl::Status appended = list.keys.Append(page->pooled_key, device_);
  stats_.key_block_bytes += list.keys.capacity_bytes() - before;  // it may have grown, even on an error
  MCSERVE_RETURN_IF_ERROR(appended);
  list.pages.push_back(page);
  list.memories.push_back(page->memory);
  if (page->tier == CheckpointTier::kHost) ++list.host_pages;
  if (page->running_refs++ == 0) ++stats_.referenced_pages;
  return absl::OkStatus();
}

void CheckpointStore::Pop(List& list, std::list<HotEntry>& hot) {
  McCheckpoint* page = list.pages.back();
  list.pages.pop_back();
  list.memories.pop_back();
  list.keys.DropNewest(1);
  if (page->tier == CheckpointTier::kHost) {
    --list.host_pages;
    Forget(hot, page->id);
  }
  if (--page->running_refs == 0) --stats_.referenced_pages;
  FreeIfUnused(page);
}

void CheckpointStore::FreeIfUnused(McCheckpoint* page) {
  if (page->running_refs > 0 || page->index_refs > 0) return;
  stats_.device_bytes -= page->pooled_key.nbytes();
  if (page->tier == CheckpointTier::kDevice) {
    stats_.device_bytes -= page->memory.nbytes();
    device_memory_bytes_ -= page->memory.nbytes();
    --stats_.device_pages;
  } else {
    stats_.host_bytes -= page->memory.nbytes();
    --stats_.host_pages;
  }
  pages_.erase(page->id);
}

absl::Status CheckpointStore::Adopt(int slot, int layer, CheckpointList pages) {
  List& list = ListOf(slot, layer);
  MCSERVE_CHECK(list.pages.empty());
  for (const McCheckpoint* page : pages) {
    const absl::Status pushed = Push(list, const_cast<McCheckpoint*>(page));
    if (!pushed.ok()) {
      DropNewest(slot, layer, static_cast<int>(list.pages.size()));
      return pushed;
    }
  }
  return absl::OkStatus();
}

void CheckpointStore::Retain(const McCheckpoint* page) { ++const_cast<McCheckpoint*>(page)->index_refs; }

void CheckpointStore::Release(const McCheckpoint* page) {
  McCheckpoint* p = const_cast<McCheckpoint*>(page);
  MCSERVE_CHECK(p->index_refs > 0);
  --p->index_refs;
  FreeIfUnused(p);
}

CheckpointStoreStats CheckpointStore::stats() const { return stats_; }

CheckpointList CheckpointStore::Checkpoints(int slot, int layer) const { return ListOf(slot, layer).pages; }

std::span<const Tensor> CheckpointStore::PooledKeys(int slot, int layer) const { return ListOf(slot, layer).keys.keys(); }

std::span<const Tensor> CheckpointStore::Memories(int slot, int layer) const { return ListOf(slot, layer).memories; }

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
    if (i < 0 || i >= static_cast<int32_t>(list.pages.size())) {
      return absl::OutOfRangeError(absl::StrCat("Stage: checkpoint ", i, " of slot ", slot, " layer ", layer,
                                                " (it has ", list.pages.size(), ")"));
    }
    const McCheckpoint& cp = *list.pages[i];
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
  for (; count > 0 && !list.pages.empty(); --count) Pop(list, hot);
}

void CheckpointStore::Clear(int slot) {
  for (int layer = 0; layer < num_layers_; ++layer) {
    DropNewest(slot, layer, static_cast<int>(ListOf(slot, layer).pages.size()));
    std::list<HotEntry>& hot = HotOf(slot, layer);
    while (!hot.empty()) Forget(hot, hot.front().id);
    List& list = ListOf(slot, layer);
    stats_.key_block_bytes -= list.keys.capacity_bytes();
    list.keys.Clear();
  }
}

absl::Status CheckpointStore::SanityCheck() const {
  absl::flat_hash_map<uint64_t, int> running;
  int64_t key_block_bytes = 0;
  for (const List& list : lists_) {
    key_block_bytes += list.keys.capacity_bytes();
    if (list.keys.keys().size() != list.pages.size() || list.memories.size() != list.pages.size()) {
      return absl::InternalError(absl::StrCat("checkpoint store: a list holds ", list.pages.size(), " pages but ",
                                              list.keys.keys().size(), " pooled keys and ", list.memories.size(),
                                              " memories side by side"));
    }
    int host = 0;
    for (size_t i = 0; i < list.pages.size(); ++i) {
      const McCheckpoint* page = list.pages[i];
      auto it = pages_.find(page->id);
      if (it == pages_.end() || it->second.get() != page) {
        return absl::InternalError(absl::StrCat("checkpoint store: a list holds page ", page->id, ", which is not live"));
      }
      ++running[page->id];
      const Tensor& key = list.keys.keys()[i];
      if (list.memories[i].shape() != page->memory.shape() || list.memories[i].device() != page->memory.device()) {
        return absl::InternalError(absl::StrCat("checkpoint store: page ", page->id, "'s memory is ",
                                                page->memory.DebugString(), " but its list's view ",
                                                list.memories[i].DebugString()));
      }
      if (key.shape() != page->pooled_key.shape()) {
        return absl::InternalError(absl::StrCat("checkpoint store: page ", page->id, "'s pooled key is ",
                                                page->pooled_key.DebugString(), " but its list's copy ",
                                                key.DebugString()));
      }
      host += page->tier == CheckpointTier::kHost ? 1 : 0;
    }
    if (host != list.host_pages) {
      return absl::InternalError(absl::StrCat("checkpoint store: a list counts ", list.host_pages,
                                              " host pages but holds ", host));
    }
  }
  if (key_block_bytes != stats_.key_block_bytes) {
    return absl::InternalError(absl::StrCat("checkpoint store: recorded ", stats_.key_block_bytes,
                                            " bytes of side-by-side pooled keys; the lists hold ", key_block_bytes));
  }
  CheckpointStoreStats counted;
  for (const auto& [id, page] : pages_) {
    const int refs = running.contains(id) ? running.at(id) : 0;
    if (refs != page->running_refs) {
      return absl::InternalError(absl::StrCat("checkpoint store: page ", id, " counts ", page->running_refs,
                                              " running references but lists hold it ", refs, " times"));
    }
    if (page->running_refs == 0 && page->index_refs == 0) {
      return absl::InternalError(absl::StrCat("checkpoint store: page ", id, " is unreferenced but alive"));
    }
    counted.referenced_pages += refs > 0 ? 1 : 0;
    counted.device_bytes += page->pooled_key.nbytes();
    if (page->tier == CheckpointTier::kDevice) {
      ++counted.device_pages;
      counted.device_bytes += page->memory.nbytes();
    } else {
      ++counted.host_pages;
      counted.host_bytes += page->memory.nbytes();
    }
  }
  if (counted.device_pages != stats_.device_pages || counted.host_pages != stats_.host_pages ||
      counted.device_bytes != stats_.device_bytes || counted.host_bytes != stats_.host_bytes ||
      counted.referenced_pages != stats_.referenced_pages) {
    return absl::InternalError(absl::StrCat(
        "checkpoint store: recorded pages ", stats_.device_pages, "/", stats_.host_pages, ", bytes ",
        stats_.device_bytes, "/", stats_.host_bytes, ", referenced ", stats_.referenced_pages, "; counted ",
        counted.device_pages, "/", counted.host_pages, ", ", counted.device_bytes, "/", counted.host_bytes, ", ",
        counted.referenced_pages));
  }
  return absl::OkStatus();
}

}  // namespace mcserve::engine
