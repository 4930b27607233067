#include "kernels/core/host_block_cache.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace mcserve::kernels {
namespace {

constexpr size_t kAlignment = 64;

thread_local HostBlockCache* current_cache = nullptr;

size_t RoundedSize(size_t nbytes) {
  const size_t rounded = (nbytes + kAlignment - 1) / kAlignment * kAlignment;
  return rounded == 0 ? kAlignment : rounded;
}

}  // namespace

bool PoisonForOverwrite() {
  static const bool poison = [] {
    const char* env = std::getenv("MCSERVE_POISON_FOR_OVERWRITE");
    return env != nullptr && std::strcmp(env, "1") == 0;
  }();
  return poison;
}

std::shared_ptr<void> AllocateHostBlock(size_t nbytes) {
  const size_t rounded = RoundedSize(nbytes);
  void* p = std::aligned_alloc(kAlignment, rounded);
  if (p == nullptr) return nullptr;
  std::memset(p, 0, rounded);
  return std::shared_ptr<void>(p, [](void* q) { std::free(q); });
}

std::shared_ptr<void> HostBlockCache::Acquire(size_t nbytes, Fill fill) {
  const size_t rounded = RoundedSize(nbytes);
  if (rounded > limits_.max_block_bytes) return nullptr;
  SizeClass& c = classes_[rounded];
  const size_t n = c.blocks.size();
  // From the block after the last one taken, wrapping (no division: this runs per tensor).
  for (size_t i = 0, at = c.next < n ? c.next : 0; i < n; ++i, at = at + 1 == n ? 0 : at + 1) {
    // use_count 1: only the cache holds the block, and nobody else can take a new reference to it.
    if (c.blocks[at].use_count() != 1) continue;
    std::atomic_thread_fence(std::memory_order_acquire);  // the last user's writes happen before ours
    c.next = at + 1 == n ? 0 : at + 1;
    if (fill == Fill::kZeros) {
      std::memset(c.blocks[at].get(), 0, rounded);
    } else if (PoisonForOverwrite()) {
      std::memset(c.blocks[at].get(), 0xff, rounded);
    }
    return c.blocks[at];
  }
  if (total_bytes_ + rounded > limits_.max_total_bytes) return nullptr;
  std::shared_ptr<void> block = AllocateHostBlock(rounded);
  if (block == nullptr) return nullptr;
  c.blocks.push_back(block);
  total_bytes_ += rounded;
  return block;
}

HostBlockCache::Scope::Scope(HostBlockCache* cache) : previous_(current_cache) { current_cache = cache; }

HostBlockCache::Scope::~Scope() { current_cache = previous_; }

HostBlockCache* HostBlockCache::Current() { return current_cache; }

}  // namespace mcserve::kernels
