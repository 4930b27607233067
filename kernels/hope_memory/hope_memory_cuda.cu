// CUDA HopeMemory, HopeFeatures and HopeMemWrite (the same scan kernel): one block of kThreads per (sequence, head) walks the sequence's tokens in order,
// in place in the state pools. The block runs hope_memory_scan.h with its threads as the team: each
// phase (anchor copies, the E hidden units and d outputs of every memory MLP, the conv channels,
// the weight updates) is spread over the threads, the per-token vectors live in dynamic shared
// memory (HopeScratchFloats(d, E) floats), and every value is computed by one thread with the CPU's
// arithmetic. The batch layout and phase live on the device and are checked here: a sequence whose
// rows fall outside [0, T) is skipped; one whose slot is outside [0, num_slots) or whose phase is
// negative gets NaN outputs and no state writes.
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/cuda/cuda_compat.h"
#include "kernels/hope_memory/hope_features.h"
#include "kernels/hope_memory/hope_mem_write.h"
#include "kernels/hope_memory/hope_memory.h"
#include "kernels/hope_memory/hope_memory_params.h"
#include "kernels/hope_memory/hope_memory_scan.h"

namespace {

namespace math = ::mcserve::kernels::hope_memory_math;

constexpr int kThreads = 128;
constexpr int64_t kMaxSharedBytes = 48 * 1024;

// The block's threads as the scan's team.
struct BlockTeam {
  int tid, size;
  __device__ void Sync() const { __syncthreads(); }
};

// Launch: grid B·H, block kThreads, dynamic shared HopeScratchFloats(d, E) floats.
__global__ void __launch_bounds__(kThreads) HopeScan(math::HopeScanParams p) {
  MCSERVE_DYNAMIC_SHARED(float, shared);
  const BlockTeam team{static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x)};
  math::ScanHead(p, blockIdx.x / p.heads, blockIdx.x % p.heads, shared, team);
}

}  // namespace

namespace mcserve::kernels::internal::MCSERVE_CUDA_NS {

using ::mcserve::kernels::MCSERVE_CUDA_NS::KernelStream;
using ::mcserve::kernels::MCSERVE_CUDA_NS::TakeLaunchStatus;

namespace {

// Launches the scan over every (sequence, head) of one call of op `op`.
absl::Status LaunchScan(const math::HopeScanParams& p, int64_t num_seqs, const char* op) {
  if (num_seqs == 0 || p.t == 0) return absl::OkStatus();
  const int64_t shared_bytes = math::HopeScratchFloats(p.d, p.e) * static_cast<int64_t>(sizeof(float));
  if (shared_bytes > kMaxSharedBytes || num_seqs * p.heads > 0x7fffffff) {
    return absl::UnimplementedError(absl::StrCat(op, ": d = ", p.d, ", E = ", p.e, ", B·H = ", num_seqs * p.heads,
                                                 " exceed the CUDA kernel's limits ((6·d + 5·E + 8) floats of shared "
                                                 "memory ≤ 48 KiB, B·H < 2³¹)"));
  }
  MCSERVE_ASSIGN_OR_RETURN(cudaStream_t stream, KernelStream());
  MCSERVE_LAUNCH(HopeScan, static_cast<unsigned>(num_seqs * p.heads), kThreads, static_cast<size_t>(shared_bytes),
                 stream)(p);
  return TakeLaunchStatus("HopeScan");
}

}  // namespace

absl::Status HopeMemoryCuda(const Context& /*ctx*/, const HopeMemoryArgs& args) {
  return LaunchScan(math::MakeScanParams(args), args.layout.slot_ids->dim(0), "HopeMemory");
}

absl::Status HopeFeaturesCuda(const Context& /*ctx*/, const HopeFeaturesArgs& args) {
  return LaunchScan(math::MakeScanParams(args), args.layout.slot_ids->dim(0), "HopeFeatures");
}

absl::Status HopeMemWriteCuda(const Context& /*ctx*/, const HopeMemWriteArgs& args) {
  return LaunchScan(math::MakeScanParams(args), args.layout.slot_ids->dim(0), "HopeMemWrite");
}

}  // namespace mcserve::kernels::internal::MCSERVE_CUDA_NS
