// The CUDA emulator's public surface: what a kernel `.cu` source may use when it is compiled by the
// host compiler (MCSERVE_CUDA_EMU defined) and run on the CPU. Include kernels/cuda/cuda_compat.h,
// not this header. Threads of a block run as cooperatively scheduled fibers on the launching OS
// thread; blocks run one at a time in grid order; every launch is synchronous. The exact feature
// list, scheduling model and limits are in kernels/cuda/emu/README.md.
#pragma once

#if defined(__CUDACC__)
#error "kernels/cuda/emu/emu.h is for the host compiler; include kernels/cuda/cuda_compat.h"
#endif

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"

// CUDA keywords. `__shared__` is static storage: one block runs at a time (process-wide), so
// every block sees the same storage, as on a GPU where each block has its own. Not reset between
// blocks. `extern __shared__` does not compile: use MCSERVE_DYNAMIC_SHARED (cuda_compat.h).
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __shared__ static
#define __constant__
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
// __restrict__ is already a GCC/Clang keyword.

namespace mcserve::kernels::emu {

struct uint3 {
  unsigned x, y, z;
};

// Launch dimensions; unspecified components are 1, as in CUDA.
struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}  // NOLINT: implicit as in CUDA
  constexpr operator uint3() const { return uint3{x, y, z}; }
};

// Small vector types (alignment as in CUDA).
struct alignas(8) float2 { float x, y; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(8) int2 { int x, y; };
struct alignas(16) int4 { int x, y, z, w; };
inline float2 make_float2(float x, float y) { return float2{x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
inline int2 make_int2(int x, int y) { return int2{x, y}; }
inline int4 make_int4(int x, int y, int z, int w) { return int4{x, y, z, w}; }

namespace internal {
// Written by the scheduler before each fiber switch; read through the const references below.
extern uint3 g_thread_idx;
extern uint3 g_block_idx;
extern dim3 g_block_dim;
extern dim3 g_grid_dim;
}  // namespace internal

// The running CUDA thread's built-in variables (valid inside a kernel).
inline const uint3& threadIdx = internal::g_thread_idx;
inline const uint3& blockIdx = internal::g_block_idx;
inline const dim3& blockDim = internal::g_block_dim;
inline const dim3& gridDim = internal::g_grid_dim;
inline constexpr int warpSize = 32;

// Block-wide barrier: returns when every thread of the block has called it. Threads that exited
// before it make the launch fail with a deadlock error (undefined behaviour in CUDA).
void __syncthreads();
// Barrier that also returns the number of threads with predicate != 0 / whether all / any did.
int __syncthreads_count(int predicate);
int __syncthreads_and(int predicate);
int __syncthreads_or(int predicate);
// Memory fences: no-ops here (one OS thread runs the whole block), compiler fences only.
inline void __threadfence() { __atomic_signal_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() { __atomic_signal_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_system() { __atomic_signal_fence(__ATOMIC_SEQ_CST); }
// Read-only cached load.
template <typename T>
inline T __ldg(const T* p) { return *p; }
// Aborts the kernel: the launch fails with an Internal error naming the block and thread.
[[noreturn]] void __trap();

// Order in which runnable threads of a block are resumed. A kernel whose result depends on it
// has a race (e.g. a missing __syncthreads); tests run every kernel under both and compare.
enum class Schedule { kForward, kReverse };
// Process-wide; any thread. The default comes from MCSERVE_CUDA_EMU_SCHEDULE=forward|reverse.
void SetSchedule(Schedule schedule);
Schedule GetSchedule();
// Parses "forward" / "reverse"; false for anything else.
bool ParseSchedule(const char* text, Schedule* schedule);

// Sets the schedule for its lifetime (tests).
class ScopedSchedule {
 public:
  explicit ScopedSchedule(Schedule s) : saved_(GetSchedule()) { SetSchedule(s); }
  ~ScopedSchedule() { SetSchedule(saved_); }
  ScopedSchedule(const ScopedSchedule&) = delete;
  ScopedSchedule& operator=(const ScopedSchedule&) = delete;

 private:
  Schedule saved_;
};

// Limits checked at launch (those of sm_80/sm_90 without opt-in attributes).
inline constexpr unsigned kMaxThreadsPerBlock = 1024;
inline constexpr size_t kMaxDynamicSharedBytes = 48 * 1024;

// Runs body(ctx) as every thread of a grid(grid) x block(block) launch, synchronously, with
// `shared_bytes` of dynamic shared memory. Returns (and records for TakeLastError) an
// InvalidArgument error for a bad configuration, Internal for a deadlock, a livelock, __trap(),
// or a misused warp collective. Called by MCSERVE_LAUNCH; any OS thread (launches serialise).
using KernelBody = void (*)(void* ctx);
absl::Status LaunchKernel(dim3 grid, dim3 block, size_t shared_bytes, KernelBody body, void* ctx);

// The first launch error on the calling OS thread since the last call, which clears it (like
// cudaGetLastError); OK if none. PeekLastError does not clear it.
absl::Status TakeLastError();
absl::Status PeekLastError();

// The current block's dynamic shared memory (`shared_bytes` of the launch, 16-byte aligned,
// filled with a schedule-dependent byte pattern at the start of each block).
void* DynamicSharedMemory();

// The callable returned by MCSERVE_LAUNCH(kernel, grid, block, shared_bytes, stream): calling it
// with the kernel's arguments runs the kernel (arguments are converted to the parameter types
// once, then copied into every thread's parameters, as CUDA does). Errors go to TakeLastError.
template <typename... Params>
class Launcher {
 public:
  Launcher(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes)
      : kernel_(kernel), grid_(grid), block_(block), shared_bytes_(shared_bytes) {}

  template <typename... Args>
  void operator()(Args&&... args) const {
    static_assert(sizeof...(Args) == sizeof...(Params), "wrong number of kernel arguments");
    struct Ctx {
      void (*kernel)(Params...);
      std::tuple<std::decay_t<Params>...> params;
    } ctx{kernel_, std::tuple<std::decay_t<Params>...>(std::forward<Args>(args)...)};
    KernelBody body = [](void* p) {
      Ctx* c = static_cast<Ctx*>(p);
      std::apply(c->kernel, c->params);  // by-value parameters: each thread gets its own copy
    };
    (void)LaunchKernel(grid_, block_, shared_bytes_, body, &ctx);
  }

 private:
  void (*kernel_)(Params...);
  dim3 grid_, block_;
  size_t shared_bytes_;
};

// Used by MCSERVE_LAUNCH; `stream` is accepted and ignored (launches are synchronous).
template <typename... Params, typename Stream>
Launcher<Params...> MakeLauncher(void (*kernel)(Params...), dim3 grid, dim3 block,
                                 size_t shared_bytes, Stream&& /*stream*/) {
  return Launcher<Params...>(kernel, grid, block, shared_bytes);
}

// CUDA's error API for launch errors (the detailed message is in TakeLastError).
enum cudaError_t : int {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorLaunchFailure = 719,
};
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
const char* cudaGetErrorString(cudaError_t error);
struct StreamOpaque;
using cudaStream_t = StreamOpaque*;

}  // namespace mcserve::kernels::emu

#include "kernels/cuda/emu/emu_math.h"  // IWYU pragma: export
#include "kernels/cuda/emu/emu_warp.h"  // IWYU pragma: export

// The CUDA names, at global scope as in CUDA. Only translation units compiled for the emulator
// include this header, so they never meet the real CUDA declarations.
using mcserve::kernels::emu::blockDim;
using mcserve::kernels::emu::blockIdx;
using mcserve::kernels::emu::cudaError_t;
using mcserve::kernels::emu::cudaErrorInvalidConfiguration;
using mcserve::kernels::emu::cudaErrorInvalidValue;
using mcserve::kernels::emu::cudaErrorLaunchFailure;
using mcserve::kernels::emu::cudaGetErrorString;
using mcserve::kernels::emu::cudaGetLastError;
using mcserve::kernels::emu::cudaPeekAtLastError;
using mcserve::kernels::emu::cudaStream_t;
using mcserve::kernels::emu::cudaSuccess;
using mcserve::kernels::emu::dim3;
using mcserve::kernels::emu::float2;
using mcserve::kernels::emu::float4;
using mcserve::kernels::emu::gridDim;
using mcserve::kernels::emu::int2;
using mcserve::kernels::emu::int4;
using mcserve::kernels::emu::make_float2;
using mcserve::kernels::emu::make_float4;
using mcserve::kernels::emu::make_int2;
using mcserve::kernels::emu::make_int4;
using mcserve::kernels::emu::threadIdx;
using mcserve::kernels::emu::uint3;
using mcserve::kernels::emu::warpSize;
using mcserve::kernels::emu::__ldg;
using mcserve::kernels::emu::__syncthreads;
using mcserve::kernels::emu::__syncthreads_and;
using mcserve::kernels::emu::__syncthreads_count;
using mcserve::kernels::emu::__syncthreads_or;
using mcserve::kernels::emu::__threadfence;
using mcserve::kernels::emu::__threadfence_block;
using mcserve::kernels::emu::__threadfence_system;
using mcserve::kernels::emu::__trap;
