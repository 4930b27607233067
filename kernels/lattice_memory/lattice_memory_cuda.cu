// CUDA LatticeMemory: one block per (sequence, head) walks the sequence's tokens in order against
// that head's [m, d] slots, in place in the state pool. Per token the block stages q, k, v in shared
// memory, then runs the shared math of lattice_memory_math.h spread over its threads: slot norms
// (a thread per slot), the signal h (a thread per column), ‖h‖² (thread 0, index order), the slot
// coefficients and updates (a thread per slot; slots are disjoint rows), then the read-out (a thread
// per column). Every value is computed by exactly one thread with the CPU's arithmetic order.
//
// The batch layout lives on the device and is checked here: a sequence whose rows fall outside
// [0, T) is skipped; one whose slot is outside [0, num_slots) gets NaN outputs and no state writes.
// m and d are limited to kMaxDim (shared staging); larger heads report Unimplemented.
#include <cstdint>

#include "base/status_macros.h"
#include "kernels/core/tensor_data.h"
#include "kernels/cuda/cuda_compat.h"
#include "kernels/lattice_memory/lattice_memory.h"
#include "kernels/lattice_memory/lattice_memory_math.h"

namespace {

using mcserve::kernels::LatticeStepOptions;

constexpr int kThreads = 128;
constexpr int kMaxDim = 256;

// Device pointers and sizes of one call: q, k [T, H, m], v [T, H, d], gamma, mu [T, H] (mu may be
// null), cu [B + 1], slots [B], state [num_slots, H, m, d], out [T, H, d].
struct LatticeParams {
  LatticeStepOptions opt;
  int m, d;
  int64_t t, hs, num_slots;
  const float *q, *k, *v, *gamma, *mu;
  const int32_t *cu, *slots;
  float *state, *out;
};

// Launch: grid B·H, block kThreads, static shared 6·kMaxDim + 1 floats.
__global__ void __launch_bounds__(kThreads) LatticeScan(LatticeParams p) {
  __shared__ float q_s[kMaxDim], k_s[kMaxDim], v_s[kMaxDim], norm_s[kMaxDim], c_s[kMaxDim], h_s[kMaxDim];
  __shared__ float h2_s;
  const int64_t b = blockIdx.x / p.hs, h = blockIdx.x % p.hs;
  const int tid = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x);
  const int m = p.m, d = p.d;
  const int64_t begin = p.cu[b], end = p.cu[b + 1];
  if (begin < 0 || end < begin || end > p.t) return;  // uniform over the block
  const int64_t slot = p.slots[b];
  if (slot < 0 || slot >= p.num_slots) {
    for (int64_t t = begin; t < end; ++t) {
      for (int j = tid; j < d; j += nt) p.out[(t * p.hs + h) * d + j] = __int_as_float(0x7fc00000);
    }
    return;
  }
  float* M = p.state + (slot * p.hs + h) * static_cast<int64_t>(m) * d;
  for (int64_t t = begin; t < end; ++t) {
    const int64_t th = t * p.hs + h;
    __syncthreads();  // the previous token is done with the staged inputs
    for (int i = tid; i < m; i += nt) {
      q_s[i] = p.q[th * m + i];
      k_s[i] = p.k[th * m + i];
      norm_s[i] = mcserve::kernels::LatticeRowNorm(M + static_cast<int64_t>(i) * d, d);
    }
    for (int j = tid; j < d; j += nt) v_s[j] = p.v[th * d + j];
    __syncthreads();
    for (int j = tid; j < d; j += nt) {
      h_s[j] = mcserve::kernels::LatticeSignal(M, k_s, norm_s, v_s, j, m, d, p.opt.variant);
    }
    for (int i = tid; i < m; i += nt) {
      c_s[i] = mcserve::kernels::LatticeCoefficient(M + static_cast<int64_t>(i) * d, norm_s[i], k_s[i], v_s, d,
                                                    p.opt.variant);
    }
    __syncthreads();
    if (tid == 0) h2_s = mcserve::kernels::LatticeSquaredNorm(h_s, d);
    __syncthreads();
    const float gamma = p.gamma[th], mu = p.mu != nullptr ? p.mu[th] : 1.0f;
    for (int i = tid; i < m; i += nt) {
      mcserve::kernels::LatticeSlotUpdate(M + static_cast<int64_t>(i) * d, norm_s[i], c_s[i], h_s, h2_s, gamma, mu, d,
                                          p.opt.analytic);
    }
    __syncthreads();
    if (p.opt.normalized_readout) {
      for (int i = tid; i < m; i += nt) {
        norm_s[i] = mcserve::kernels::LatticeRowNorm(M + static_cast<int64_t>(i) * d, d);
      }
      __syncthreads();
    }
    for (int j = tid; j < d; j += nt) {
      p.out[th * d + j] = mcserve::kernels::LatticeRead(M, q_s, p.opt.normalized_readout ? norm_s : nullptr, j, m, d);
    }
  }
}

}  // namespace

namespace mcserve::kernels::internal::MCSERVE_CUDA_NS {

using ::mcserve::kernels::MCSERVE_CUDA_NS::KernelStream;

absl::Status LatticeMemoryCuda(const Context& ctx, const LatticeMemoryArgs& args) {
  const int64_t num_seqs = args.layout.slot_ids->dim(0);
  const int64_t hs = args.q->dim(1), m = args.q->dim(2), d = args.v->dim(2);
  if (num_seqs == 0) return absl::OkStatus();
  if (m > kMaxDim || d > kMaxDim) {
    return absl::UnimplementedError("LatticeMemory: CUDA kernel supports m, d <= 256");
  }
  if (num_seqs * hs > 0x7fffffff) return absl::InvalidArgumentError("LatticeMemory: too many sequences and heads");
  const LatticeParams p{
      .opt = {.variant = args.variant, .analytic = args.analytic_renorm, .normalized_readout = args.normalized_readout},
      .m = static_cast<int>(m), .d = static_cast<int>(d), .t = args.q->dim(0), .hs = hs,
      .num_slots = args.state->dim(0), .q = Data<float>(*args.q), .k = Data<float>(*args.k),
      .v = Data<float>(*args.v), .gamma = Data<float>(*args.gamma),
      .mu = args.mu != nullptr ? Data<float>(*args.mu) : nullptr, .cu = Data<int32_t>(*args.layout.cu_seqlens),
      .slots = Data<int32_t>(*args.layout.slot_ids), .state = Data<float>(*args.state), .out = Data<float>(*args.out)};
  MCSERVE_ASSIGN_OR_RETURN(cudaStream_t stream, KernelStream());
  MCSERVE_LAUNCH(LatticeScan, static_cast<unsigned>(num_seqs * hs), kThreads, 0, stream)(p);
  return ::mcserve::kernels::MCSERVE_CUDA_NS::TakeLaunchStatus("LatticeScan");
}

}  // namespace mcserve::kernels::internal::MCSERVE_CUDA_NS
