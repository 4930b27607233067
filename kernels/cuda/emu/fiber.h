// Fibers for the CUDA emulator: one per CUDA thread of the block being run, all switched on the
// OS thread that launched the kernel. Internal to kernels/cuda/emu/ (emu.cc, warp.cc).
// x86-64 uses a hand-written stack switch (no syscall per switch); other targets, or builds with
// MCSERVE_CUDA_EMU_UCONTEXT defined, use ucontext. Switches are annotated for AddressSanitizer.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace mcserve::kernels::emu::internal {

// A fixed set of fibers with stacks allocated once (mmap, guard page below) and reused by every
// launch. Not thread-safe: the emulator uses it under its launch lock.
class FiberPool {
 public:
  // What a fiber runs: entry(index). When it returns the fiber is finished.
  using Entry = void (*)(int index);

  // Stack of each fiber (a guard page below it turns an overflow into SIGSEGV).
  static constexpr size_t kStackBytes =
#if defined(__SANITIZE_ADDRESS__)
      512 * 1024;
#else
      256 * 1024;
#endif

  FiberPool();
  ~FiberPool();
  FiberPool(const FiberPool&) = delete;
  FiberPool& operator=(const FiberPool&) = delete;

  // Makes sure fibers 0..n-1 exist; false if their stacks cannot be mapped.
  bool Reserve(int n);
  // Prepares fiber i to run entry(i) from the top of its stack at its next Resume. A fiber that
  // was left suspended (its block aborted) may be restarted this way.
  void Start(int i, Entry entry);
  // Scheduler side: runs fiber i until it calls Yield or its entry returns.
  void Resume(int i);
  // Fiber side: suspends the running fiber and returns to the scheduler; returns when resumed.
  void Yield();
  // Fiber side: leaves the running fiber for good (it is never resumed until Start).
  [[noreturn]] void Abandon();

 private:
  struct Fiber;
  static void Trampoline();
  [[noreturn]] void ExitToScheduler();

  std::vector<std::unique_ptr<Fiber>> fibers_;
  Entry entry_ = nullptr;
  int current_ = -1;
  struct SchedulerContext;
  std::unique_ptr<SchedulerContext> scheduler_;
};

}  // namespace mcserve::kernels::emu::internal
