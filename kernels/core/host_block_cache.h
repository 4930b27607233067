// HostBlockCache: reuses the host buffers of the tensors a loop makes and drops on every iteration (a
// decode step makes a few hundred), so that the steady state allocates nothing. A block is free again
// when the cache holds its only reference; Tensor::Zeros and Tensor::ForOverwrite on the CPU take
// blocks from the cache installed on its thread (Scope), and allocate as before where none is.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace mcserve::kernels {

class HostBlockCache {
 public:
  // Blocks above max_block_bytes are never cached; past max_total_bytes nothing new is cached.
  struct Limits {
    size_t max_block_bytes = size_t{16} << 20;
    size_t max_total_bytes = size_t{256} << 20;
  };

  HostBlockCache() : HostBlockCache(Limits{}) {}
  explicit HostBlockCache(Limits limits) : limits_(limits) {}
  HostBlockCache(const HostBlockCache&) = delete;
  HostBlockCache& operator=(const HostBlockCache&) = delete;

  // What a reused block holds when it is handed out.
  enum class Fill {
    kZeros,
    // Whatever its last user left (an op's output that the op writes whole): no memset. Filled with
    // 0xff bytes (NaN as floats) instead when MCSERVE_POISON_FOR_OVERWRITE=1 (every unit test sets
    // it), so a read before the write shows.
    kUnspecified,
  };
  // A 64-byte-aligned block of at least `nbytes` bytes, filled as `fill` says (a new block is zeroed
  // either way); null when the request is over the limits (the caller allocates on its own) or the
  // allocation fails. From the owning thread only.
  std::shared_ptr<void> Acquire(size_t nbytes, Fill fill = Fill::kZeros);

  // Bytes of every block the cache holds, free or in use. From the owning thread only.
  size_t cached_bytes() const { return total_bytes_; }

  // Installs `cache` as the calling thread's cache until the Scope ends (restoring the previous one).
  class Scope {
   public:
    explicit Scope(HostBlockCache* cache);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    HostBlockCache* previous_;
  };

  // The cache installed on the calling thread, or null.
  static HostBlockCache* Current();

 private:
  // Blocks of one rounded size, and where the next search for a free one starts.
  struct SizeClass {
    std::vector<std::shared_ptr<void>> blocks;
    size_t next = 0;
  };

  Limits limits_;
  size_t total_bytes_ = 0;
  absl::flat_hash_map<size_t, SizeClass> classes_;  // keyed by the rounded block size
};

// Whether memory handed out for overwrite (Fill::kUnspecified blocks, cpu::OpScratchForOverwrite) is
// filled with 0xff bytes, NaN as floats: MCSERVE_POISON_FOR_OVERWRITE=1, read once. Any thread.
bool PoisonForOverwrite();

// A zeroed host block of `nbytes` (64-byte aligned, at least 64 bytes) from malloc; null on failure.
std::shared_ptr<void> AllocateHostBlock(size_t nbytes);

}  // namespace mcserve::kernels
