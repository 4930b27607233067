// Counts the calling process's heap allocations (malloc, calloc, realloc and the aligned forms) while
// a CountAllocations scope is open on any thread. The including test binary replaces glibc's entry
// points with counting ones that forward to glibc's own (__libc_*), so include this header in exactly
// one .cc of a test binary that runs without a sanitizer.
#pragma once

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>

extern "C" {
void* __libc_malloc(size_t size);
void* __libc_calloc(size_t n, size_t size);
void* __libc_realloc(void* p, size_t size);
void* __libc_memalign(size_t alignment, size_t size);
}

namespace mcserve::testing {

inline std::atomic<bool> counting_allocations{false};
inline std::atomic<int64_t> allocations_counted{0};

inline void CountOne() {
  if (counting_allocations.load(std::memory_order_relaxed)) allocations_counted.fetch_add(1, std::memory_order_relaxed);
}

// Counts every allocation any thread makes from construction to Stop() (or destruction).
class CountAllocations {
 public:
  CountAllocations() {
    allocations_counted = 0;
    counting_allocations = true;
  }
  ~CountAllocations() { Stop(); }
  // Stops counting; returns the allocations counted.
  int64_t Stop() {
    counting_allocations = false;
    return allocations_counted.load();
  }
};

}  // namespace mcserve::testing

extern "C" {
void* malloc(size_t size) {
  mcserve::testing::CountOne();
  return __libc_malloc(size);
}
void* calloc(size_t n, size_t size) {
  mcserve::testing::CountOne();
  return __libc_calloc(n, size);
}
void* realloc(void* p, size_t size) {
  mcserve::testing::CountOne();
  return __libc_realloc(p, size);
}
void* aligned_alloc(size_t alignment, size_t size) {
  mcserve::testing::CountOne();
  return __libc_memalign(alignment, size);
}
void* memalign(size_t alignment, size_t size) {
  mcserve::testing::CountOne();
  return __libc_memalign(alignment, size);
}
int posix_memalign(void** out, size_t alignment, size_t size) {
  mcserve::testing::CountOne();
  void* p = __libc_memalign(alignment, size);
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}
}
