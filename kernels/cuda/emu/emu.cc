// CUDA emulator: launches, the per-block fiber scheduler, barriers, errors and schedules.
#include "kernels/cuda/emu/emu.h"

#include <atomic>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/cuda/emu/emu_internal.h"

namespace mcserve::kernels::emu {
namespace internal {

uint3 g_thread_idx{};
uint3 g_block_idx{};
dim3 g_block_dim;
dim3 g_grid_dim;
BlockRun* g_run = nullptr;
int g_current = -1;

FiberPool& Pool() {
  static FiberPool* pool = new FiberPool();  // lives as long as the process
  return *pool;
}

std::string ThreadName(const BlockRun& run, int t) {
  const uint3 i = run.threads[t].idx;
  return absl::StrFormat("block (%u,%u,%u) thread (%u,%u,%u)", g_block_idx.x, g_block_idx.y,
                         g_block_idx.z, i.x, i.y, i.z);
}

void SetRunError(absl::Status status) {
  if (g_run->error.ok()) g_run->error = std::move(status);
}

void AbandonRunning() { Pool().Abandon(); }

}  // namespace internal

namespace {
using internal::BarrierKind;
using internal::BlockRun;
using internal::EmuThread;
using internal::g_current;
using internal::g_run;
using internal::ThreadState;

// Passes in a row in which every resumed thread only failed an atomicCAS: a spin-wait nothing in
// this block can satisfy (e.g. on another block, which runs later or has run already).
constexpr int kMaxSpinPasses = 20000;

std::mutex& LaunchMutex() {
  static std::mutex* mu = new std::mutex();
  return *mu;
}
thread_local bool t_in_launch = false;
thread_local absl::Status t_last_error;

KernelBody g_body = nullptr;
void* g_body_ctx = nullptr;
unsigned char* g_dynamic_shared = nullptr;

std::atomic<int> g_schedule{-1};  // -1: not read from the environment yet

std::string Dim(dim3 d) { return absl::StrFormat("(%u,%u,%u)", d.x, d.y, d.z); }

void ThreadMain(int index) {
  bool failed = false;
  {
    std::string exception;
    try {
      g_body(g_body_ctx);
    } catch (const std::exception& e) {
      exception = e.what();
    } catch (...) {
      exception = "unknown exception";
    }
    if (!exception.empty()) {
      failed = true;
      internal::SetRunError(absl::InternalError(absl::StrCat(
          "CUDA emulator: ", internal::ThreadName(*g_run, index), " threw: ", exception)));
    }
  }
  if (failed) internal::AbandonRunning();
  g_run->threads[index].state = ThreadState::kDone;
}

int SyncThreadsImpl(BarrierKind kind, int predicate) {
  if (g_run == nullptr) return predicate;  // called outside a kernel
  BlockRun& run = *g_run;
  EmuThread& t = run.threads[g_current];
  if (run.at_barrier > 0 && run.barrier_kind != kind) {
    internal::SetRunError(absl::InternalError(
        absl::StrCat("CUDA emulator: ", internal::ThreadName(run, g_current),
                     " reached a different kind of __syncthreads than the threads already waiting")));
    internal::AbandonRunning();
  }
  run.barrier_kind = kind;
  t.predicate = predicate != 0;
  t.state = ThreadState::kBarrier;
  ++run.at_barrier;
  internal::Pool().Yield();
  return t.barrier_result;
}

void ReleaseBarrier(BlockRun& run) {
  int count = 0;
  for (const EmuThread& t : run.threads) count += t.predicate;
  int result = 0;
  switch (run.barrier_kind) {
    case BarrierKind::kPlain: break;
    case BarrierKind::kCount: result = count; break;
    case BarrierKind::kAnd: result = count == run.n; break;
    case BarrierKind::kOr: result = count > 0; break;
  }
  for (EmuThread& t : run.threads) {
    t.state = ThreadState::kRunnable;
    t.barrier_result = result;
  }
  run.at_barrier = 0;
}

absl::Status DeadlockError(const BlockRun& run) {
  int at_warp = 0, exited = -1, warp_waiter = -1;
  for (int i = 0; i < run.n; ++i) {
    if (run.threads[i].state == ThreadState::kWarp) {
      ++at_warp;
      if (warp_waiter < 0) warp_waiter = i;
    }
    if (run.threads[i].state == ThreadState::kDone && exited < 0) exited = i;
  }
  std::string msg = absl::StrFormat(
      "CUDA emulator: deadlock in block (%u,%u,%u) of a %s x %s launch: %d thread(s) wait at "
      "__syncthreads(), %d at warp collectives, %d exited",
      internal::g_block_idx.x, internal::g_block_idx.y, internal::g_block_idx.z,
      Dim(internal::g_grid_dim), Dim(internal::g_block_dim), run.at_barrier, at_warp, run.done);
  if (run.at_barrier > 0 && run.done > 0) {
    absl::StrAppend(&msg, "; __syncthreads() must be reached by every thread of the block, but ",
                    internal::ThreadName(run, exited), " exited first");
  }
  if (warp_waiter >= 0) absl::StrAppend(&msg, "; ", internal::DescribeWarpWait(run, warp_waiter));
  return absl::InternalError(msg);
}

// Runs the threads of the current block until all exit; the block's error otherwise.
absl::Status RunBlock(BlockRun& run) {
  internal::FiberPool& pool = internal::Pool();
  for (int i = 0; i < run.n; ++i) {
    EmuThread& t = run.threads[i];
    t.state = ThreadState::kRunnable;
    t.cas_spin = false;
    pool.Start(i, &ThreadMain);
  }
  run.at_barrier = 0;
  run.done = 0;
  const bool forward = run.schedule == Schedule::kForward;
  int spin_passes = 0;
  while (run.done < run.n) {
    bool ran = false, progress = false;
    for (int k = 0; k < run.n; ++k) {
      const int i = forward ? k : run.n - 1 - k;
      EmuThread& t = run.threads[i];
      if (t.state != ThreadState::kRunnable) continue;
      ran = true;
      t.cas_spin = false;
      g_current = i;
      internal::g_thread_idx = t.idx;
      pool.Resume(i);
      g_current = -1;
      if (!run.error.ok()) return run.error;
      if (!t.cas_spin) progress = true;
      switch (t.state) {
        case ThreadState::kBarrier:
          if (run.at_barrier == run.n) {
            ReleaseBarrier(run);
          } else {
            internal::CompleteWarpGroups(run, i / 32);  // a pending __activemask may complete
          }
          break;
        case ThreadState::kWarp:
          internal::CompleteWarpGroups(run, i / 32);
          break;
        case ThreadState::kDone:
          ++run.done;
          internal::CompleteWarpGroups(run, i / 32);
          break;
        case ThreadState::kRunnable:  // yielded from a failed atomicCAS
          break;
      }
      if (!run.error.ok()) return run.error;
    }
    if (!ran) return DeadlockError(run);
    spin_passes = progress ? 0 : spin_passes + 1;
    if (spin_passes > kMaxSpinPasses) {
      return absl::InternalError(absl::StrFormat(
          "CUDA emulator: livelock in block (%u,%u,%u): every running thread keeps failing "
          "atomicCAS (a spin-wait on another block, or on memory no thread of this block writes)",
          internal::g_block_idx.x, internal::g_block_idx.y, internal::g_block_idx.z));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateLaunch(dim3 grid, dim3 block, size_t shared_bytes, KernelBody body) {
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("CUDA emulator: invalid launch configuration ",
                                                   "grid ", Dim(grid), " block ", Dim(block),
                                                   " shared ", shared_bytes, " bytes: ", why));
  };
  if (body == nullptr) return bad("no kernel");
  if (grid.x == 0 || grid.y == 0 || grid.z == 0) return bad("grid dimensions must be >= 1");
  if (block.x == 0 || block.y == 0 || block.z == 0) return bad("block dimensions must be >= 1");
  if (grid.x > 2147483647u || grid.y > 65535 || grid.z > 65535) {
    return bad("grid dimensions exceed (2^31-1, 65535, 65535)");
  }
  if (block.x > 1024 || block.y > 1024 || block.z > 64) {
    return bad("block dimensions exceed (1024, 1024, 64)");
  }
  const uint64_t threads = uint64_t{block.x} * block.y * block.z;
  if (threads > kMaxThreadsPerBlock) {
    return bad(absl::StrCat(threads, " threads per block, more than ", kMaxThreadsPerBlock));
  }
  if (shared_bytes > kMaxDynamicSharedBytes) {
    return bad(absl::StrCat("more than ", kMaxDynamicSharedBytes, " bytes of dynamic shared memory"));
  }
  return absl::OkStatus();
}

absl::Status LaunchImpl(dim3 grid, dim3 block, size_t shared_bytes, KernelBody body, void* ctx) {
  if (absl::Status s = ValidateLaunch(grid, block, shared_bytes, body); !s.ok()) return s;
  if (t_in_launch) {
    return absl::FailedPreconditionError(
        "CUDA emulator: kernel launch from inside a kernel (dynamic parallelism) is not supported");
  }
  std::lock_guard<std::mutex> lock(LaunchMutex());
  t_in_launch = true;
  struct Reset {
    ~Reset() {
      t_in_launch = false;
      g_run = nullptr;
      g_dynamic_shared = nullptr;
      g_body = nullptr;
      g_body_ctx = nullptr;
    }
  } reset;

  BlockRun run;
  run.n = static_cast<int>(block.x * block.y * block.z);
  run.schedule = GetSchedule();
  if (!internal::Pool().Reserve(run.n)) {
    return absl::ResourceExhaustedError("CUDA emulator: cannot map fiber stacks");
  }
  run.threads.resize(run.n);
  for (int i = 0; i < run.n; ++i) {
    const unsigned u = static_cast<unsigned>(i);
    run.threads[i].idx = uint3{u % block.x, (u / block.x) % block.y, u / (block.x * block.y)};
  }
  // Exactly `shared_bytes` (operator new[] aligns to 16), so ASan catches overruns.
  std::unique_ptr<unsigned char[]> shared(new unsigned char[shared_bytes]);
  const unsigned char pattern = run.schedule == Schedule::kForward ? 0xff : 0x7f;

  g_run = &run;
  g_body = body;
  g_body_ctx = ctx;
  g_dynamic_shared = shared.get();
  internal::g_block_dim = block;
  internal::g_grid_dim = grid;
  for (unsigned z = 0; z < grid.z; ++z) {
    for (unsigned y = 0; y < grid.y; ++y) {
      for (unsigned x = 0; x < grid.x; ++x) {
        internal::g_block_idx = uint3{x, y, z};
        if (shared_bytes > 0) std::memset(shared.get(), pattern, shared_bytes);
        if (absl::Status s = RunBlock(run); !s.ok()) return s;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

namespace internal {
void OnCasFailed() {
  if (g_run == nullptr || g_current < 0) return;
  g_run->threads[g_current].cas_spin = true;
  Pool().Yield();
}
}  // namespace internal

void __syncthreads() { SyncThreadsImpl(BarrierKind::kPlain, 0); }
int __syncthreads_count(int predicate) { return SyncThreadsImpl(BarrierKind::kCount, predicate); }
int __syncthreads_and(int predicate) { return SyncThreadsImpl(BarrierKind::kAnd, predicate); }
int __syncthreads_or(int predicate) { return SyncThreadsImpl(BarrierKind::kOr, predicate); }

void __trap() {
  if (g_run == nullptr) std::abort();  // outside a kernel
  internal::SetRunError(absl::InternalError(absl::StrCat(
      "CUDA emulator: __trap() in ", internal::ThreadName(*g_run, g_current))));
  internal::AbandonRunning();
}

bool ParseSchedule(const char* text, Schedule* schedule) {
  if (text == nullptr) return false;
  if (std::strcmp(text, "forward") == 0) {
    *schedule = Schedule::kForward;
    return true;
  }
  if (std::strcmp(text, "reverse") == 0) {
    *schedule = Schedule::kReverse;
    return true;
  }
  return false;
}

void SetSchedule(Schedule schedule) { g_schedule.store(static_cast<int>(schedule)); }

Schedule GetSchedule() {
  int s = g_schedule.load();
  if (s >= 0) return static_cast<Schedule>(s);
  Schedule parsed = Schedule::kForward;
  const char* env = std::getenv("MCSERVE_CUDA_EMU_SCHEDULE");
  if (env != nullptr && *env != '\0' && !ParseSchedule(env, &parsed)) {
    std::fprintf(stderr, "mcserve: ignoring MCSERVE_CUDA_EMU_SCHEDULE=%s (forward|reverse)\n", env);
  }
  int expected = -1;
  g_schedule.compare_exchange_strong(expected, static_cast<int>(parsed));
  return static_cast<Schedule>(g_schedule.load());
}

absl::Status LaunchKernel(dim3 grid, dim3 block, size_t shared_bytes, KernelBody body, void* ctx) {
  absl::Status s = LaunchImpl(grid, block, shared_bytes, body, ctx);
  if (!s.ok() && t_last_error.ok()) t_last_error = s;
  return s;
}

absl::Status TakeLastError() {
  absl::Status s = std::move(t_last_error);
  t_last_error = absl::OkStatus();
  return s;
}

absl::Status PeekLastError() { return t_last_error; }

void* DynamicSharedMemory() { return g_dynamic_shared; }

namespace {
cudaError_t ToCudaError(const absl::Status& s) {
  if (s.ok()) return cudaSuccess;
  return s.code() == absl::StatusCode::kInvalidArgument ? cudaErrorInvalidConfiguration
                                                        : cudaErrorLaunchFailure;
}
}  // namespace

cudaError_t cudaGetLastError() { return ToCudaError(TakeLastError()); }
cudaError_t cudaPeekAtLastError() { return ToCudaError(PeekLastError()); }

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
  }
  return "unknown error";
}

__half __float2half(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t a = x & 0x7fffffffu;
  if (a >= 0x7f800000u) {  // inf / NaN (NaN stays NaN)
    return __half{static_cast<uint16_t>(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0u))};
  }
  if (a >= 0x477ff000u) return __half{static_cast<uint16_t>(sign | 0x7c00u)};  // rounds to inf
  if (a < 0x38800000u) {  // below 2^-14: subnormal half (or zero), value m * 2^-24
    if (a <= 0x33000000u) return __half{sign};  // <= 2^-25 rounds to zero (tie to even)
    const uint32_t mant = (a & 0x7fffffu) | 0x800000u;
    const int shift = 126 - static_cast<int>(a >> 23);  // 14..24
    uint32_t m = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (m & 1u))) ++m;
    return __half{static_cast<uint16_t>(sign | m)};
  }
  uint32_t h = (a - 0x38000000u) >> 13;  // rebias the exponent 127 -> 15
  const uint32_t rem = a & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return __half{static_cast<uint16_t>(sign | h)};
}

}  // namespace mcserve::kernels::emu
