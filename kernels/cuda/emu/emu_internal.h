// CUDA emulator internals shared by emu.cc (launch, blocks, barriers) and warp.cc (collectives).
// Everything here is touched only under the launch lock, by the launching OS thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "kernels/cuda/emu/emu.h"
#include "kernels/cuda/emu/fiber.h"

namespace mcserve::kernels::emu::internal {

enum class ThreadState : uint8_t { kRunnable, kBarrier, kWarp, kDone };
enum class BarrierKind : uint8_t { kPlain, kCount, kAnd, kOr };

// A lane's pending warp collective and, once it completes, its result.
struct WarpRequest {
  WarpOp op = WarpOp::kSync;
  unsigned mask = 0;
  uint64_t value = 0;
  int arg = 0;
  int width = 32;
  uint64_t result = 0;
};

// One CUDA thread of the running block.
struct EmuThread {
  uint3 idx{};
  ThreadState state = ThreadState::kRunnable;
  bool cas_spin = false;  // its last yield was a failed atomicCAS
  int predicate = 0;      // argument of __syncthreads_count/_and/_or
  int barrier_result = 0;
  WarpRequest warp;
};

// The block being executed.
struct BlockRun {
  int n = 0;  // threads per block
  Schedule schedule = Schedule::kForward;
  std::vector<EmuThread> threads;  // [n], linear thread id (x fastest)
  int at_barrier = 0;
  int done = 0;
  BarrierKind barrier_kind = BarrierKind::kPlain;
  absl::Status error;  // first error; the block (and launch) stops at once
};

extern BlockRun* g_run;  // null outside a launch
extern int g_current;    // linear id of the running thread, -1 on the scheduler side

FiberPool& Pool();
// "block (x,y,z) thread (x,y,z)" of linear thread t of the running block.
std::string ThreadName(const BlockRun& run, int t);
// Fiber side, on a kernel error: SetRunError records the block's error (first one wins), then
// AbandonRunning leaves the fiber for good. Two statements, so that no temporary (a message
// string) is left undestroyed in the abandoned frame.
void SetRunError(absl::Status status);
[[noreturn]] void AbandonRunning();
// Scheduler side, after a lane of `warp` arrived at a collective or exited: completes every group
// whose lanes have all arrived (makes them runnable with their results).
void CompleteWarpGroups(BlockRun& run, int warp);
// What thread t, blocked at a warp collective, is waiting for (deadlock reports).
std::string DescribeWarpWait(const BlockRun& run, int t);
const char* WarpOpName(WarpOp op);

}  // namespace mcserve::kernels::emu::internal
