// Small CUDA kernels for cuda_emu_test.cc, written as a `.cu` source would be; compiled here by
// the host compiler with MCSERVE_CUDA_EMU defined (the including file defines it).
#pragma once

#include "kernels/cuda/cuda_compat.h"

namespace mcserve::kernels::cuda_emu_test {

// Every thread inside [nz, ny, nx] counts itself in hits[z][y][x] and records its coordinates
// in coords[z][y][x][0..2]; thread (0,0,0) of block (0,0,0) writes blockDim and gridDim to dims.
__global__ void IndexKernel(int nx, int ny, int nz, int* hits /* [nz, ny, nx] */,
                            int* coords /* [nz, ny, nx, 3] */, unsigned* dims /* [6] */) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y = blockIdx.y * blockDim.y + threadIdx.y;
  const int z = blockIdx.z * blockDim.z + threadIdx.z;
  if (x == 0 && y == 0 && z == 0) {
    dims[0] = blockDim.x, dims[1] = blockDim.y, dims[2] = blockDim.z;
    dims[3] = gridDim.x, dims[4] = gridDim.y, dims[5] = gridDim.z;
  }
  if (x >= nx || y >= ny || z >= nz) return;
  const int i = (z * ny + y) * nx + x;
  atomicAdd(&hits[i], 1);
  coords[3 * i] = x, coords[3 * i + 1] = y, coords[3 * i + 2] = z;
}

constexpr int kReduceThreads = 256;

// out[block] = tree sum of in[block * 256 ...] (zeros past n), barriers between levels.
__global__ void ReduceKernel(const float* in /* [n] */, int n, float* out /* [grid] */) {
  __shared__ float s[kReduceThreads];
  const int tid = threadIdx.x;
  const int i = blockIdx.x * blockDim.x + tid;
  s[tid] = i < n ? in[i] : 0.0f;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
    if (tid < stride) s[tid] += s[tid + stride];
    __syncthreads();
  }
  if (tid == 0) out[blockIdx.x] = s[0];
}

// The same reduction with its barriers missing: a data race on shared memory.
__global__ void RacyReduceKernel(const float* in /* [n] */, int n, float* out /* [grid] */) {
  __shared__ float s[kReduceThreads];
  const int tid = threadIdx.x;
  const int i = blockIdx.x * blockDim.x + tid;
  s[tid] = i < n ? in[i] : 0.0f;
  for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
    if (tid < stride) s[tid] += s[tid + stride];
  }
  if (tid == 0) out[blockIdx.x] = s[0];
}

// Per thread: full-warp xor-butterfly sum, down-shuffle sum (valid in lane 0), inclusive scan
// with up-shuffles, broadcast of lane 5, width-8 broadcast of segment lane 2, and a 16-lane
// (mask 0x0000ffff) butterfly sum in lanes 0..15 (-1 elsewhere). out is [6][blockDim.x].
__global__ void WarpShuffleKernel(const float* in /* [blockDim.x] */, float* out) {
  const int tid = threadIdx.x;
  const int lane = tid % warpSize;
  const int n = blockDim.x;
  const float v = in[tid];
  float x = v;
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  float d = v;
  for (int o = 16; o > 0; o >>= 1) d += __shfl_down_sync(0xffffffffu, d, o);
  float scan = v;
  for (int o = 1; o < 32; o <<= 1) {
    const float t = __shfl_up_sync(0xffffffffu, scan, o);
    if (lane >= o) scan += t;
  }
  out[tid] = x;
  out[n + tid] = d;
  out[2 * n + tid] = scan;
  out[3 * n + tid] = __shfl_sync(0xffffffffu, v, 5);
  out[4 * n + tid] = __shfl_sync(0xffffffffu, v, 2, 8);
  float p = -1.0f;
  if (lane < 16) {
    p = v;
    for (int o = 8; o > 0; o >>= 1) p += __shfl_xor_sync(0x0000ffffu, p, o);
  }
  out[5 * n + tid] = p;
}

// Votes per thread (out is [6][blockDim.x]): full-mask ballot/any/all of pred[tid] != 0, a ballot
// among the odd lanes only (mask 0xaaaaaaaa) of lane % 3 == 0 (0 in even lanes), __activemask()
// of the whole warp, and __activemask() in lanes 0..15 only (0 elsewhere).
__global__ void VoteKernel(const int* pred /* [blockDim.x] */, unsigned* out) {
  const int tid = threadIdx.x;
  const int lane = tid % warpSize;
  const int n = blockDim.x;
  out[tid] = __ballot_sync(0xffffffffu, pred[tid]);
  out[n + tid] = __any_sync(0xffffffffu, pred[tid]);
  out[2 * n + tid] = __all_sync(0xffffffffu, pred[tid]);
  unsigned odd = 0;
  if (lane & 1) odd = __ballot_sync(0xaaaaaaaau, lane % 3 == 0);
  out[3 * n + tid] = odd;
  unsigned diverged = 0;
  if (lane < 16) diverged = __activemask();
  out[4 * n + tid] = __activemask();
  out[5 * n + tid] = diverged;
}

// A 64-bit shuffle: out[tid] = in[tid ^ 1] (doubles travel whole).
__global__ void ShuffleDoubleKernel(const double* in, double* out) {
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, in[threadIdx.x], 1);
}

// Many threads hitting the same words with every atomic; the CAS loop adds g to *cas_sum; each
// thread records what atomicExch returned in exch_old[g].
__global__ void AtomicsKernel(int* i_sum, unsigned* u_sum, float* f_sum, int* i_max, int* i_min,
                              unsigned long long* cas_sum, int* exch, int* exch_old /* [threads] */) {
  const int g = blockIdx.x * blockDim.x + threadIdx.x;
  atomicAdd(i_sum, g);
  atomicAdd(u_sum, 1u);
  atomicAdd(f_sum, 1.0f);
  atomicMax(i_max, (g * 7) % 1000);
  atomicMin(i_min, 500 - g);
  unsigned long long old = *cas_sum, assumed;
  do {
    assumed = old;
    old = atomicCAS(cas_sum, assumed, assumed + static_cast<unsigned long long>(g));
  } while (old != assumed);
  exch_old[g] = atomicExch(exch, g);
}

// out[g] = in of the mirrored thread of the block, through dynamic shared memory laid out as
// [blockDim.x floats][1 int counter]; counts[block] = threads that passed the first barrier.
__global__ void DynamicSharedKernel(const float* in, int n, float* out, int* counts) {
  MCSERVE_DYNAMIC_SHARED(float, buf);
  int* counter = reinterpret_cast<int*>(buf + blockDim.x);
  const int tid = threadIdx.x;
  const int g = blockIdx.x * blockDim.x + tid;
  if (tid == 0) *counter = 0;
  buf[tid] = g < n ? in[g] : 0.0f;
  __syncthreads();
  atomicAdd(counter, 1);
  if (g < n) out[g] = buf[blockDim.x - 1 - tid];
  __syncthreads();
  if (tid == 0) counts[blockIdx.x] = *counter;
}

// Reads dynamic shared memory nobody wrote (a bug): out[tid] = its bits.
__global__ void UninitializedSharedKernel(unsigned* out) {
  MCSERVE_DYNAMIC_SHARED(unsigned, buf);
  out[threadIdx.x] = buf[threadIdx.x];
}

// out[0..2] = __syncthreads_count/_and/_or of "thread id is odd".
__global__ void SyncCountKernel(int* out) {
  const int odd = threadIdx.x & 1;
  const int c = __syncthreads_count(odd);
  const int a = __syncthreads_and(odd);
  const int o = __syncthreads_or(odd);
  if (threadIdx.x == 0) out[0] = c, out[1] = a, out[2] = o;
}

// Deadlock: half the block returns before a barrier the other half waits at.
__global__ void EarlyExitBarrierKernel(int* out) {
  if (threadIdx.x < 16) return;
  __syncthreads();
  out[threadIdx.x] = 1;
}

// Deadlock: lane 0 waits in a full-warp shuffle while the others wait at a barrier.
__global__ void ShuffleVersusBarrierKernel(int* out) {
  if (threadIdx.x == 0) {
    out[0] = __shfl_sync(0xffffffffu, 1, 0);
  } else {
    __syncthreads();
  }
}

// Misuse: lane 1 calls a shuffle whose mask names only lane 0.
__global__ void LaneNotInMaskKernel(int* out) {
  if (threadIdx.x == 1) out[0] = __shfl_sync(0x1u, 1, 0);
}

// Aborts in thread 3 of block 1.
__global__ void TrapKernel(int* out) {
  if (blockIdx.x == 1 && threadIdx.x == 3) __trap();
  out[blockIdx.x * blockDim.x + threadIdx.x] = 1;
}

// Livelock: block 0 spins on a flag that only block 1 (which runs later) sets.
__global__ void CrossBlockSpinKernel(int* flag) {
  if (blockIdx.x == 0) {
    while (atomicCAS(flag, 1, 1) != 1) {
    }
  } else {
    atomicExch(flag, 1);
  }
}

// Bug: writes one float past the end of its dynamic shared memory (blockDim.x floats).
__global__ void SharedOverrunKernel() {
  MCSERVE_DYNAMIC_SHARED(float, buf);
  buf[threadIdx.x + 1] = 1.0f;
}

// Sets out[g] = 1 for every thread of the grid (to see whether a rejected launch ran).
__global__ void MarkKernel(int* out) {
  const unsigned per_block = blockDim.x * blockDim.y * blockDim.z;
  const unsigned block = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  out[block * per_block + (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x] = 1;
}

}  // namespace mcserve::kernels::cuda_emu_test
