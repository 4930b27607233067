// CUDA McSegmentPool / McLevelPool. Both are a scan along each sequence's rows, independent per
// (sequence, state head, key element): one block per (sequence, state head), its threads striding
// over the K key elements, each walking the sequence's rows in order and calling the shared per-row
// math with dim 1 (so every element gets exactly the CPU arithmetic). The batch layout and the
// first positions are read inside the kernels; device-side values are not validated on the host, so
// the kernels skip slots outside the pool and rows outside [0, T), and McLevelPool writes NaN (and
// leaves the state alone) for a position outside [1, 2^L) rather than indexing out of range.
#include <cstdint>

#include "base/status_macros.h"
#include "kernels/core/tensor_data.h"
#include "kernels/cuda/cuda_compat.h"
#include "kernels/mc_pool/mc_pool.h"
#include "kernels/mc_pool/mc_pool_math.h"

namespace {

namespace math = ::mcserve::kernels::mc_pool_math;

// Geometry shared by both kernels. k [T, Hk, K]; out [T, Hs, K]; state per slot: [Hs, L, K] (L = 1
// for the segment pool).
struct PoolGeometry {
  int64_t t, hk, hs, dim, num_slots;
};

// Launch: grid (B, Hs), block (threads), no shared memory; threads stride over K.
__global__ void SegmentPoolKernel(PoolGeometry g, const float* __restrict__ k, const int32_t* __restrict__ cu,
                                  const int32_t* __restrict__ slots, const int32_t* __restrict__ first,
                                  int64_t segment_size, bool mean, float* __restrict__ sum, float* __restrict__ out) {
  const int64_t b = blockIdx.x, h = blockIdx.y, ratio = g.hs / g.hk;
  const int32_t slot = slots[b];
  if (slot < 0 || slot >= g.num_slots) return;
  const int64_t r0 = cu[b], r1 = cu[b + 1];
  float* s = sum + (static_cast<int64_t>(slot) * g.hs + h) * g.dim;
  for (int64_t d = threadIdx.x; d < g.dim; d += blockDim.x) {
    for (int64_t r = r0 < 0 ? 0 : r0; r < r1 && r < g.t; ++r) {
      const int64_t j = (first[b] - 1 + (r - r0)) % segment_size + 1;
      math::PoolRow(s + d, k + (r * g.hk + h / ratio) * g.dim + d, 1, j, j == 1, mean,
                    out + (r * g.hs + h) * g.dim + d);
    }
  }
}

// Launch: grid (B, Hs), block (threads), no shared memory; threads stride over K.
__global__ void LevelPoolKernel(PoolGeometry g, int levels, const float* __restrict__ k,
                                const int32_t* __restrict__ cu, const int32_t* __restrict__ slots,
                                const int32_t* __restrict__ first, bool mean, float* __restrict__ sums,
                                float* __restrict__ out) {
  const int64_t b = blockIdx.x, h = blockIdx.y, ratio = g.hs / g.hk;
  const int32_t slot = slots[b];
  if (slot < 0 || slot >= g.num_slots) return;
  const int64_t r0 = cu[b], r1 = cu[b + 1];
  float* s = sums + (static_cast<int64_t>(slot) * g.hs + h) * levels * g.dim;
  for (int64_t d = threadIdx.x; d < g.dim; d += blockDim.x) {
    for (int64_t r = r0 < 0 ? 0 : r0; r < r1 && r < g.t; ++r) {
      const int64_t n = first[b] + (r - r0);
      float* o = out + (r * g.hs + h) * g.dim + d;
      if (n < 1 || n >= (int64_t{1} << levels)) {
        *o = __int_as_float(0x7fc00000);  // quiet NaN: position outside the state's range
        continue;
      }
      math::LevelPoolRowStrided(s + d, g.dim, k + (r * g.hk + h / ratio) * g.dim + d, 1, levels, n, mean, o);
    }
  }
}

// Threads per block: K rounded up to a warp, at most 256.
unsigned ThreadsFor(int64_t dim) {
  const int64_t warps = (dim + 31) / 32;
  return static_cast<unsigned>(warps >= 8 ? 256 : 32 * (warps < 1 ? 1 : warps));
}

}  // namespace

namespace mcserve::kernels::internal::MCSERVE_CUDA_NS {

using ::mcserve::kernels::MCSERVE_CUDA_NS::KernelStream;

absl::Status McSegmentPoolCuda(const Context& ctx, const McSegmentPoolArgs& a) {
  const PoolGeometry g{a.k->dim(0), a.k->dim(1), a.out->dim(1), a.k->dim(2), a.pool_sum->dim(0)};
  const int64_t num_seqs = a.layout.slot_ids->dim(0);
  if (num_seqs == 0 || g.hs == 0 || g.dim == 0 || g.t == 0) return absl::OkStatus();
  if (num_seqs > 0x7fffffff || g.hs > 65535) {
    return absl::InvalidArgumentError("McSegmentPool: too many sequences or state heads for one CUDA launch");
  }
  MCSERVE_ASSIGN_OR_RETURN(cudaStream_t stream, KernelStream());
  MCSERVE_LAUNCH(SegmentPoolKernel, dim3(static_cast<unsigned>(num_seqs), static_cast<unsigned>(g.hs)),
                 ThreadsFor(g.dim), 0, stream)
  (g, Data<float>(*a.k), Data<int32_t>(*a.layout.cu_seqlens), Data<int32_t>(*a.layout.slot_ids),
   Data<int32_t>(*a.first_local), a.segment_size, a.mean, Data<float>(*a.pool_sum), Data<float>(*a.out));
  return ::mcserve::kernels::MCSERVE_CUDA_NS::TakeLaunchStatus("McSegmentPool");
}

absl::Status McLevelPoolCuda(const Context& ctx, const McLevelPoolArgs& a) {
  const PoolGeometry g{a.k->dim(0), a.k->dim(1), a.out->dim(1), a.k->dim(2), a.level_sums->dim(0)};
  const int levels = static_cast<int>(a.level_sums->dim(2));
  const int64_t num_seqs = a.layout.slot_ids->dim(0);
  if (num_seqs == 0 || g.hs == 0 || g.dim == 0 || g.t == 0) return absl::OkStatus();
  if (num_seqs > 0x7fffffff || g.hs > 65535) {
    return absl::InvalidArgumentError("McLevelPool: too many sequences or state heads for one CUDA launch");
  }
  MCSERVE_ASSIGN_OR_RETURN(cudaStream_t stream, KernelStream());
  MCSERVE_LAUNCH(LevelPoolKernel, dim3(static_cast<unsigned>(num_seqs), static_cast<unsigned>(g.hs)),
                 ThreadsFor(g.dim), 0, stream)
  (g, levels, Data<float>(*a.k), Data<int32_t>(*a.layout.cu_seqlens), Data<int32_t>(*a.layout.slot_ids),
   Data<int32_t>(*a.first_position), a.mean, Data<float>(*a.level_sums), Data<float>(*a.out));
  return ::mcserve::kernels::MCSERVE_CUDA_NS::TakeLaunchStatus("McLevelPool");
}

}  // namespace mcserve::kernels::internal::MCSERVE_CUDA_NS
