#include "engine/serving/prefix_cache.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace mcserve::engine {
namespace {

// 64-bit FNV-1a over the block's ids, seeded with the parent's hash, then a final avalanche.
uint64_t DefaultHash(uint64_t parent, std::span<const int32_t> block) {
  uint64_t h = 0xcbf29ce484222325ull ^ (parent * 0x9e3779b97f4a7c15ull);
  for (int32_t id : block) {
    for (int b = 0; b < 4; ++b) {
      h ^= (static_cast<uint32_t>(id) >> (8 * b)) & 0xffu;
      h *= 0x100000001b3ull;
    }
  }
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h;
}

}  // namespace

PrefixCache::PrefixCache(CheckpointStore* store, int64_t block_tokens, int64_t byte_budget, HashFn hash)
    : store_(store), block_(block_tokens), budget_(byte_budget), hash_(hash ? std::move(hash) : DefaultHash) {
  MCSERVE_CHECK(block_ > 0);
}

PrefixCache::~PrefixCache() {
  // Leaves before parents, so every entry is removable.
  while (!lru_.empty()) {
    auto it = std::find_if(lru_.begin(), lru_.end(), [](const Entry* e) { return e->children == 0; });
    MCSERVE_CHECK(it != lru_.end());
    Remove(*it);
  }
}

PrefixCache::Entry* PrefixCache::Find(Entry* parent, uint64_t hash, std::span<const int32_t> block) const {
  auto it = index_.find(hash);
  if (it == index_.end()) return nullptr;
  for (Entry* e : it->second) {
    if (e->parent == parent && std::equal(e->tokens.begin(), e->tokens.end(), block.begin(), block.end())) return e;
  }
  return nullptr;  // a collision, or nothing: never trust the hash alone
}

void PrefixCache::Touch(Entry* e) { lru_.splice(lru_.begin(), lru_, e->lru); }

PrefixCache::Entry* PrefixCache::Lookup(std::span<const int32_t> tokens, int64_t max_blocks) {
  Entry* found = nullptr;
  uint64_t hash = 0;
  const int64_t blocks = std::min<int64_t>(max_blocks, static_cast<int64_t>(tokens.size()) / block_);
  for (int64_t j = 0; j < blocks; ++j) {
    const std::span<const int32_t> block = tokens.subspan(j * block_, block_);
    hash = hash_(hash, block);
    Entry* next = Find(found, hash, block);
    if (next == nullptr) break;
    found = next;
  }
  for (Entry* e = found; e != nullptr; e = e->parent) Touch(e);
  return found;
}

PrefixCache::Entry* PrefixCache::Insert(Entry* parent, std::span<const int32_t> block,
                                        std::vector<LayerSnapshot> state, const std::vector<CheckpointList>& pages) {
  MCSERVE_CHECK(static_cast<int64_t>(block.size()) == block_);
  const uint64_t hash = hash_(parent == nullptr ? 0 : parent->hash, block);
  if (Entry* existing = Find(parent, hash, block)) {
    Touch(existing);
    return existing;
  }
  int64_t bytes = 0;
  for (const LayerSnapshot& layer : state) {
    for (const auto& [name, t] : layer) bytes += t.nbytes();
  }
  if (parent != nullptr) Use(parent);  // not evicted while making room for its child
  while (budget_ >= 0 && bytes_ + bytes > budget_ && EvictOne()) {
  }
  if (parent != nullptr) Unuse(parent);
  if (budget_ >= 0 && bytes_ + bytes > budget_) return nullptr;

  auto owned = std::make_unique<Entry>();
  Entry* e = owned.get();
  e->parent = parent;
  e->tokens.assign(block.begin(), block.end());
  e->blocks = parent == nullptr ? 1 : parent->blocks + 1;
  e->hash = hash;
  e->state = std::move(state);
  e->bytes = bytes;
  for (CheckpointList layer : pages) {
    e->pages.emplace_back(layer.begin(), layer.end());
    for (const McCheckpoint* page : layer) store_->Retain(page);
  }
  if (parent != nullptr) ++parent->children;
  lru_.push_front(e);
  e->lru = lru_.begin();
  index_[hash].push_back(e);
  bytes_ += bytes;
  owned_.emplace(e, std::move(owned));
  return e;
}

void PrefixCache::Unuse(Entry* e) {
  MCSERVE_CHECK(e->users > 0);
  --e->users;
}

bool PrefixCache::EvictOne() {
  for (auto it = lru_.rbegin(); it != lru_.rend(); ++it) {
    Entry* e = *it;
    if (e->users > 0 || e->children > 0) continue;
    Remove(e);
    ++evictions_;
    return true;
  }
  return false;
}

void PrefixCache::Remove(Entry* e) {
  for (const auto& layer : e->pages) {
    for (const McCheckpoint* page : layer) store_->Release(page);
  }
  if (e->parent != nullptr) --e->parent->children;
  auto& bucket = index_[e->hash];
  bucket.erase(std::find(bucket.begin(), bucket.end(), e));
  if (bucket.empty()) index_.erase(e->hash);
  lru_.erase(e->lru);
  bytes_ -= e->bytes;
  owned_.erase(e);
}

absl::Status PrefixCache::SanityCheck() const {
  absl::flat_hash_map<const Entry*, int> children;
  int64_t bytes = 0;
  for (const Entry* e : lru_) {
    if (!owned_.contains(e)) return absl::InternalError("prefix cache: an LRU entry is not owned");
    if (e->parent != nullptr) {
      if (!owned_.contains(e->parent)) return absl::InternalError("prefix cache: an entry's parent is gone");
      ++children[e->parent];
    }
    bytes += e->bytes;
  }
  for (const Entry* e : lru_) {
    const int counted = children.contains(e) ? children.at(e) : 0;
    if (counted != e->children) {
      return absl::InternalError(
          absl::StrCat("prefix cache: an entry counts ", e->children, " children but has ", counted));
    }
  }
  if (bytes != bytes_ || owned_.size() != lru_.size()) {
    return absl::InternalError(absl::StrCat("prefix cache: ", bytes_, " bytes recorded, ", bytes, " counted"));
  }
  return absl::OkStatus();
}

}  // namespace mcserve::engine
