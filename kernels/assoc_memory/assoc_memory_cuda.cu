// CUDA AssocMemory (assoc_memory.h), one block per row for the read and the write's recall terms,
// one block per (sequence, feature) for the write's update; a thread per output column, each value
// one thread's in-order sum with assoc_memory_math.h (the CPU's arithmetic up to FMA contraction,
// schedule-independent). The batch layout lives on the device and is checked here: a sequence whose
// rows fall outside [0, T) or whose slot is outside [0, num_slots) is skipped (no writes).
#include <cstdint>

#include "base/status_macros.h"
#include "kernels/assoc_memory/assoc_memory.h"
#include "kernels/assoc_memory/assoc_memory_math.h"
#include "kernels/core/tensor_data.h"
#include "kernels/cuda/cuda_compat.h"

namespace {

namespace am = mcserve::kernels::assoc_math;

constexpr int kThreads = 128;

// Device pointers and sizes of one call (read: fk = fq, out = h; write: the rest).
struct AssocParams {
  int64_t t, b, nf, d, num_slots;
  float eps;
  bool correction;
  const int32_t *cu, *slots, *first;
  const float *fk, *vn, *beta;
  float *delta, *gamma, *a, *z, *h;
};

// The last sequence b in [0, B) with cu[b] ≤ r (binary search; cu non-decreasing when valid).
__device__ int64_t SequenceOf(const AssocParams& p, int64_t r) {
  int64_t lo = 0, hi = p.b - 1;
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (p.cu[mid] <= r) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// Whether sequence b's rows and slot are valid and hold row r (r < 0: any rows).
__device__ bool Usable(const AssocParams& p, int64_t b, int64_t r) {
  const int64_t begin = p.cu[b], end = p.cu[b + 1], slot = p.slots[b];
  if (begin < 0 || end < begin || end > p.t || slot < 0 || slot >= p.num_slots) return false;
  return r < 0 || (r >= begin && r < end);
}

// Launch: grid T, block kThreads. h[r] += (fq[r]·A_s) / (fq[r]·z_s + eps).
__global__ void __launch_bounds__(kThreads) AssocReadKernel(AssocParams p) {
  const int64_t r = blockIdx.x, b = SequenceOf(p, r);
  if (!Usable(p, b, r)) return;
  const int64_t s = p.slots[b];
  const float* f = p.fk + r * p.nf;
  const float* a = p.a + s * p.nf * p.d;
  const float den = am::Denominator(f, p.z + s * p.nf, p.nf, p.eps);
  for (int64_t c = threadIdx.x; c < p.d; c += blockDim.x) p.h[r * p.d + c] += am::MatColumn(f, a, p.nf, p.d, c) / den;
}

// Launch: grid T, block kThreads. delta[r], gamma[r] from the old A_s, z_s.
__global__ void __launch_bounds__(kThreads) AssocRecallKernel(AssocParams p) {
  const int64_t r = blockIdx.x, b = SequenceOf(p, r);
  if (!Usable(p, b, r)) return;
  const int64_t s = p.slots[b];
  const float* f = p.fk + r * p.nf;
  const float* a = p.a + s * p.nf * p.d;
  const bool first = p.first[b] != 0;
  const float den = first ? 1.0f : am::Denominator(f, p.z + s * p.nf, p.nf, p.eps);
  if (threadIdx.x == 0) p.gamma[r] = first || !p.correction ? 1.0f : am::Gamma(f, p.nf, den, p.eps);
  for (int64_t c = threadIdx.x; c < p.d; c += blockDim.x) {
    const float vbar = first ? 0.0f : am::MatColumn(f, a, p.nf, p.d, c) / den;
    p.delta[r * p.d + c] = p.beta[r] * (p.vn[r * p.d + c] - vbar);
  }
}

// Launch: grid B·F, block kThreads. A_s[f] += Σ_i fk[i, f] delta[i];  z_s[f] += Σ_i γ_i fk[i, f].
__global__ void __launch_bounds__(kThreads) AssocUpdateKernel(AssocParams p) {
  const int64_t b = blockIdx.x / p.nf, f = blockIdx.x % p.nf;
  if (!Usable(p, b, -1)) return;
  const int64_t s = p.slots[b], begin = p.cu[b], n = p.cu[b + 1] - begin;
  const float* fk = p.fk + begin * p.nf;
  const float* delta = p.delta + begin * p.d;
  float* row = p.a + (s * p.nf + f) * p.d;
  for (int64_t c = threadIdx.x; c < p.d; c += blockDim.x) row[c] += am::UpdateEntry(fk, delta, n, p.nf, p.d, f, c);
  if (threadIdx.x == 0) p.z[s * p.nf + f] += am::UpdateZ(fk, p.gamma + begin, n, p.nf, f);
}

}  // namespace

namespace mcserve::kernels::internal::MCSERVE_CUDA_NS {

using ::mcserve::kernels::MCSERVE_CUDA_NS::KernelStream;
using ::mcserve::kernels::MCSERVE_CUDA_NS::TakeLaunchStatus;

absl::Status AssocReadCuda(const Context& ctx, const AssocReadArgs& args) {
  (void)ctx;
  const int64_t t = args.fq->dim(0), b = args.layout.slot_ids->dim(0);
  if (t == 0 || b == 0) return absl::OkStatus();
  if (t > 0x7fffffff) return absl::InvalidArgumentError("AssocRead: too many rows");
  AssocParams p{.t = t, .b = b, .nf = args.a->dim(1), .d = args.a->dim(2), .num_slots = args.a->dim(0),
                .eps = args.eps, .correction = true, .cu = Data<int32_t>(*args.layout.cu_seqlens),
                .slots = Data<int32_t>(*args.layout.slot_ids), .first = nullptr, .fk = Data<float>(*args.fq),
                .vn = nullptr, .beta = nullptr, .delta = nullptr, .gamma = nullptr,
                .a = const_cast<float*>(Data<float>(*args.a)), .z = const_cast<float*>(Data<float>(*args.z)),
                .h = Data<float>(*args.h)};
  MCSERVE_ASSIGN_OR_RETURN(cudaStream_t stream, KernelStream());
  MCSERVE_LAUNCH(AssocReadKernel, static_cast<unsigned>(t), kThreads, 0, stream)(p);
  return TakeLaunchStatus("AssocRead");
}

absl::Status AssocWriteCuda(const Context& ctx, const AssocWriteArgs& args) {
  (void)ctx;
  const int64_t t = args.fk->dim(0), b = args.layout.slot_ids->dim(0), nf = args.a->dim(1);
  if (t == 0 || b == 0) return absl::OkStatus();
  if (t > 0x7fffffff || b * nf > 0x7fffffff) return absl::InvalidArgumentError("AssocWrite: too many rows");
  AssocParams p{.t = t, .b = b, .nf = nf, .d = args.a->dim(2), .num_slots = args.a->dim(0), .eps = args.eps,
                .correction = args.correction, .cu = Data<int32_t>(*args.layout.cu_seqlens),
                .slots = Data<int32_t>(*args.layout.slot_ids), .first = Data<int32_t>(*args.first),
                .fk = Data<float>(*args.fk), .vn = Data<float>(*args.vn), .beta = Data<float>(*args.beta),
                .delta = Data<float>(*args.delta), .gamma = Data<float>(*args.gamma), .a = Data<float>(*args.a),
                .z = Data<float>(*args.z), .h = nullptr};
  MCSERVE_ASSIGN_OR_RETURN(cudaStream_t stream, KernelStream());
  MCSERVE_LAUNCH(AssocRecallKernel, static_cast<unsigned>(t), kThreads, 0, stream)(p);
  MCSERVE_RETURN_IF_ERROR(TakeLaunchStatus("AssocRecall"));
  MCSERVE_LAUNCH(AssocUpdateKernel, static_cast<unsigned>(b * nf), kThreads, 0, stream)(p);
  return TakeLaunchStatus("AssocUpdate");
}

}  // namespace mcserve::kernels::internal::MCSERVE_CUDA_NS
