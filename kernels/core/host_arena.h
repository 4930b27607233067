// HostArena: read-only host copies of a model's weights, packed into slabs aligned to 2 MiB that Linux
// backs with transparent huge pages (madvise MADV_HUGEPAGE). A decode step streams every weight once
// per token: from 4 KiB pages (the mmapped file), each page costs a TLB walk and restarts the hardware
// prefetcher at its boundary, and the batch-1 GEMV ran 1.1-1.7x slower (bench/README.md). Used while
// loading, from one thread; the tensors it returns keep their slab alive and may be read by any thread.
#pragma once

#include <cstddef>
#include <memory>
#include <span>

#include "absl/status/statusor.h"
#include "kernels/core/tensor.h"

namespace mcserve::kernels {

class HostArena {
 public:
  // Slabs of this size at least (a larger tensor gets a slab of its own size, rounded to 2 MiB).
  static constexpr size_t kSlabBytes = size_t{64} << 20;

  // A read-only copy of host tensor `src` (any dtype, same shape), 64-byte aligned.
  absl::StatusOr<Tensor> Copy(const Tensor& src);
  // A read-only F32 tensor of `shape` holding `values`.
  absl::StatusOr<Tensor> FromHost(std::span<const float> values, Shape shape);

 private:
  // `nbytes` bytes (64-byte aligned) of the current slab, or of a new one; null when mmap fails.
  void* Take(size_t nbytes);

  std::shared_ptr<void> slab_;  // the current slab (munmapped when its last tensor goes)
  size_t slab_size_ = 0, used_ = 0;
};

}  // namespace mcserve::kernels
