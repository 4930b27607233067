// The emulated CUDA device's runtime: device memory is a separate arena of mmap'd chunks that host
// code reaches only through this runtime's copies, with a caching allocator like the CUDA one;
// copies are memcpy, Synchronize is a no-op, Gemm runs OpenBLAS. Every copy and Gemm checks that
// its device ranges lie inside live allocations (InvalidArgument otherwise), and under
// AddressSanitizer freed blocks and the slack past each request are poisoned, so an out-of-bounds
// device access fails a test as compute-sanitizer's memcheck would on a GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/core/device_runtime.h"

namespace mcserve::kernels::emu {

class EmuDeviceRuntime final : public DeviceRuntime {
 public:
  EmuDeviceRuntime() = default;
  // Unmaps the arena; every block must have been freed (or is lost with it).
  ~EmuDeviceRuntime() override;
  EmuDeviceRuntime(const EmuDeviceRuntime&) = delete;
  EmuDeviceRuntime& operator=(const EmuDeviceRuntime&) = delete;

  absl::StatusOr<void*> Allocate(size_t bytes) override;
  // Free(nullptr) is a no-op; freeing anything else not from Allocate aborts (broken invariant).
  void Free(void* ptr) override;
  // Size-class bytes of live blocks, and of all blocks carved so far (live + cached).
  size_t bytes_in_use() const override;
  size_t bytes_reserved() const override;

  absl::Status CopyHostToDevice(void* dst, const void* src, size_t bytes) override;
  absl::Status CopyDeviceToHost(void* dst, const void* src, size_t bytes) override;
  absl::Status CopyDeviceToDevice(void* dst, const void* src, size_t bytes) override;
  absl::Status Zero(void* dst, size_t bytes) override;
  absl::Status Synchronize() override { return absl::OkStatus(); }
  absl::Status Gemm(const DeviceGemmArgs& args) override;

  // True when [ptr, ptr + bytes) lies inside the requested bytes of one live allocation (the
  // emulated kernels' launcher uses this to reject host pointers). Any thread.
  bool IsDeviceRange(const void* ptr, size_t bytes) const;
  // True when `ptr` points anywhere into the arena (live, cached or not yet carved).
  bool InArena(const void* ptr) const;

 private:
  struct Chunk {
    char* base = nullptr;
    size_t bytes = 0;
    size_t used = 0;  // bump offset of the next block carved from it
  };
  struct Live {
    size_t requested = 0;
    size_t size_class = 0;
  };

  // A block of exactly `size_class` bytes from a free list or freshly carved. Needs mu_.
  absl::StatusOr<char*> TakeBlock(size_t size_class) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool IsDeviceRangeLocked(const void* ptr, size_t bytes) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckDevice(const char* op, const char* what, const void* ptr, size_t bytes) const;
  absl::Status CheckHost(const char* op, const char* what, const void* ptr, size_t bytes) const;

  mutable std::mutex mu_;
  std::vector<Chunk> chunks_ ABSL_GUARDED_BY(mu_);
  // Index into chunks_ of the chunk small blocks are carved from, or -1.
  int bump_chunk_ ABSL_GUARDED_BY(mu_) = -1;
  std::unordered_map<size_t, std::vector<char*>> free_ ABSL_GUARDED_BY(mu_);  // class -> blocks
  std::map<uintptr_t, Live> live_ ABSL_GUARDED_BY(mu_);                       // start -> block
  size_t in_use_ ABSL_GUARDED_BY(mu_) = 0;
  size_t reserved_ ABSL_GUARDED_BY(mu_) = 0;
};

// The process-wide emulated runtime (RuntimeFor(Device::kCudaEmu) returns it). Thread-safe.
EmuDeviceRuntime& EmuRuntime();

}  // namespace mcserve::kernels::emu
