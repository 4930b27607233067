// PrefixCache: prefix reuse for recurrent models. A request's state after each whole block of its
// prompt (block = a multiple of the Memory Caching segment, or a fixed token count without MC) is
// kept as an entry: a host copy of the slot's state (every layer's memory, conv windows, auxiliary
// and MC running state), plus index references to the checkpoint pages the slot held then. Entries
// form chains (block j's parent is block j − 1's), indexed by a hash over the token ids of the chain;
// a hit is verified against the tokens, so a hash collision can never resume the wrong prefix.
// Entries no running sequence uses and without children are evicted LRU when the cache's byte
// budget or the checkpoint store needs room. Engine loop thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "engine/mc/checkpoint_store.h"
#include "kernels/core/tensor.h"

namespace mcserve::engine {

// One layer's state tensors of one slot, by name (host copies: [1, ...per_slot] F32).
using LayerSnapshot = std::vector<std::pair<std::string, kernels::Tensor>>;

class PrefixCache {
 public:
  struct Entry {
    Entry* parent = nullptr;                          // the previous block's entry (null for the first)
    std::vector<int32_t> tokens;                      // this block's token ids
    int64_t blocks = 0;                               // blocks of the prefix it ends (1 for the first)
    uint64_t hash = 0;                                // chain hash up to and including this block
    std::vector<LayerSnapshot> state;                 // [layers] the slot's state at the block's end
    std::vector<std::vector<const McCheckpoint*>> pages;  // [layers] pages the slot held (index refs)
    int64_t bytes = 0;                                // host bytes of `state`
    int users = 0;                                    // running sequences that continue from it
    int children = 0;
    std::list<Entry*>::iterator lru;                  // position in the LRU list
  };
  // Hash of a block of token ids chained onto the previous block's hash (replaceable in tests).
  using HashFn = std::function<uint64_t(uint64_t parent, std::span<const int32_t> block)>;

  // `store` receives the page references; `byte_budget` bounds the snapshots' host bytes (-1: none).
  PrefixCache(CheckpointStore* store, int64_t block_tokens, int64_t byte_budget, HashFn hash = nullptr);
  ~PrefixCache();
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  int64_t block_tokens() const { return block_; }
  // The entry of the longest cached prefix of `tokens` of at most `max_blocks` whole blocks, verified
  // token by token; null when not even the first block is cached. Marks the chain recently used.
  Entry* Lookup(std::span<const int32_t> tokens, int64_t max_blocks);
  // The entry for `block` (block_tokens ids) after `parent` (null = the first block): an existing one
  // if cached, else a new one built from `state` and `pages` (references taken). Null when the budget
  // cannot make room. The returned entry is marked recently used.
  Entry* Insert(Entry* parent, std::span<const int32_t> block, std::vector<LayerSnapshot> state,
                const std::vector<CheckpointList>& pages);
  // Running sequences that will extend a chain hold its last entry, which is then never evicted.
  void Use(Entry* e) { ++e->users; }
  void Unuse(Entry* e);
  // Drops the least recently used entry no one uses and with no children; false when there is none.
  bool EvictOne();

  int64_t entries() const { return static_cast<int64_t>(lru_.size()); }
  int64_t bytes() const { return bytes_; }
  // The snapshots' host byte budget (-1: none).
  int64_t byte_budget() const { return budget_; }
  int64_t evictions() const { return evictions_; }
  // Every entry's children/user counts and the byte total recounted; Internal error on a mismatch.
  absl::Status SanityCheck() const;

 private:
  Entry* Find(Entry* parent, uint64_t hash, std::span<const int32_t> block) const;
  void Touch(Entry* e);
  void Remove(Entry* e);

  CheckpointStore* store_;
  int64_t block_;
  int64_t budget_;
  HashFn hash_;
  absl::flat_hash_map<uint64_t, std::vector<Entry*>> index_;  // chain hash → entries (collisions kept)
  std::list<Entry*> lru_;                                     // most recently used first
  absl::flat_hash_map<const Entry*, std::unique_ptr<Entry>> owned_;
  int64_t bytes_ = 0;
  int64_t evictions_ = 0;
};

}  // namespace mcserve::engine
