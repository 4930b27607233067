// CUDA Attention, two launches on the kernel stream:
//   AttentionAppend: one block per sequence copies its k, v rows into its slot's caches at
//     positions cached .. cached + n − 1 (the rows are one contiguous block in both).
//   AttentionAttend: one block per (row, query head); the block finds its sequence by binary search
//     over cu_seqlens, stages q in shared memory, scores every cache position 0 .. cached + j (a
//     thread per position, logits in dynamic shared memory), takes the maximum (exact in any order),
//     exponentiates in place, then a thread per column d sums the weights and Σ_s w_s V_s,d in
//     position order. Every value is computed by one thread with attention_math.h's functions, so the
//     result is the CPU's arithmetic (up to FMA contraction) and schedule-independent.
//
// The batch layout and `cached` live on the device and are checked here: a sequence whose rows fall
// outside [0, T) is skipped; one whose slot is outside [0, num_slots), or whose cached count is
// negative or leaves no room for its rows, gets NaN outputs and no cache writes. The cache capacity
// is limited to kMaxCapacity (the logits live in shared memory); larger caches report Unimplemented.
#include <cstdint>

#include "base/status_macros.h"
#include "kernels/attention/attention.h"
#include "kernels/attention/attention_math.h"
#include "kernels/core/tensor_data.h"
#include "kernels/cuda/cuda_compat.h"

namespace {

namespace am = mcserve::kernels::attention_math;

constexpr int kThreads = 128;  // ≥ kAttentionMaxHeadDim: a thread per output column
constexpr int64_t kMaxCapacity = 8192;
static_assert(kThreads >= mcserve::kernels::kAttentionMaxHeadDim);

// Device pointers and sizes of one call: q, out [T, Hq, dh]; k, v [T, Hkv, dh]; caches
// [num_slots, capacity, Hkv, dh]; cu [B + 1]; slots, cached [B].
struct AttentionParams {
  int dh;
  int64_t t, b, hq, hkv, capacity, num_slots;
  float scale;
  const float *q, *k, *v;
  const int32_t *cu, *slots, *cached;
  float *k_cache, *v_cache, *out;
};

// Whether sequence b's slot and cached count are usable for its n rows (device-side checks).
__device__ bool SlotUsable(const AttentionParams& p, int64_t b, int64_t n) {
  const int64_t slot = p.slots[b], cached = p.cached[b];
  return slot >= 0 && slot < p.num_slots && cached >= 0 && cached + n <= p.capacity;
}

// Launch: grid B, block kThreads, no shared memory.
__global__ void __launch_bounds__(kThreads) AttentionAppend(AttentionParams p) {
  const int64_t b = blockIdx.x;
  const int64_t begin = p.cu[b], end = p.cu[b + 1];
  if (begin < 0 || end < begin || end > p.t) return;  // uniform over the block
  if (!SlotUsable(p, b, end - begin)) return;
  const int64_t row = p.hkv * p.dh, count = (end - begin) * row;
  const int64_t dst = (static_cast<int64_t>(p.slots[b]) * p.capacity + p.cached[b]) * row, src = begin * row;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
    p.k_cache[dst + i] = p.k[src + i];
    p.v_cache[dst + i] = p.v[src + i];
  }
}

// The last sequence b in [0, B) with cu[b] ≤ r (binary search; cu non-decreasing when valid).
__device__ int64_t SequenceOf(const AttentionParams& p, int64_t r) {
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

// Launch: grid T·Hq, block kThreads, static shared 2·kThreads floats, dynamic capacity·4 B.
__global__ void __launch_bounds__(kThreads) AttentionAttend(AttentionParams p) {
  __shared__ float q_s[kThreads], max_s[kThreads];
  MCSERVE_DYNAMIC_SHARED(float, w_s);  // [capacity] logits, then weights
  const int64_t r = blockIdx.x / p.hq, h = blockIdx.x % p.hq;
  const int tid = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x), dh = p.dh;
  const int64_t b = SequenceOf(p, r);
  const int64_t begin = p.cu[b], end = p.cu[b + 1];
  if (begin < 0 || end > p.t || r < begin || r >= end) return;  // uniform over the block
  float* o = p.out + (r * p.hq + h) * dh;
  if (!SlotUsable(p, b, end - begin)) {
    if (tid < dh) o[tid] = __int_as_float(0x7fc00000);  // quiet NaN
    return;
  }
  const int64_t stride = p.hkv * dh, len = p.cached[b] + (r - begin) + 1;
  const int64_t base = static_cast<int64_t>(p.slots[b]) * p.capacity * stride + (h / (p.hq / p.hkv)) * dh;
  const float* K = p.k_cache + base;
  const float* V = p.v_cache + base;
  if (tid < dh) q_s[tid] = p.q[(r * p.hq + h) * dh + tid];
  __syncthreads();
  float m = -INFINITY;
  for (int64_t s = tid; s < len; s += nt) {
    w_s[s] = am::Logit(q_s, K + s * stride, dh, p.scale);
    m = fmaxf(m, w_s[s]);
  }
  max_s[tid] = m;
  __syncthreads();
  m = -INFINITY;
  for (int i = 0; i < nt; ++i) m = fmaxf(m, max_s[i]);
  for (int64_t s = tid; s < len; s += nt) w_s[s] = am::Weight(w_s[s], m);  // this thread's own logits
  __syncthreads();
  if (tid < dh) o[tid] = am::WeightedColumn(w_s, V, stride, len, tid) / am::WeightSum(w_s, len);
}

}  // namespace

namespace mcserve::kernels::internal::MCSERVE_CUDA_NS {

using ::mcserve::kernels::MCSERVE_CUDA_NS::KernelStream;

absl::Status AttentionCuda(const Context& ctx, const AttentionArgs& args) {
  const int64_t t = args.q->dim(0), num_seqs = args.layout.slot_ids->dim(0), hq = args.q->dim(1);
  const int64_t capacity = args.k_cache->dim(1);
  if (t == 0 || num_seqs == 0) return absl::OkStatus();
  if (capacity > kMaxCapacity) {
    return absl::UnimplementedError("Attention: CUDA kernel supports a cache capacity <= 8192 positions");
  }
  if (t * hq > 0x7fffffff || num_seqs > 0x7fffffff) {
    return absl::InvalidArgumentError("Attention: too many rows and heads");
  }
  const AttentionParams p{
      .dh = static_cast<int>(args.q->dim(2)), .t = t, .b = num_seqs, .hq = hq, .hkv = args.k->dim(1),
      .capacity = capacity, .num_slots = args.k_cache->dim(0), .scale = AttentionScale(args),
      .q = Data<float>(*args.q), .k = Data<float>(*args.k), .v = Data<float>(*args.v),
      .cu = Data<int32_t>(*args.layout.cu_seqlens), .slots = Data<int32_t>(*args.layout.slot_ids),
      .cached = Data<int32_t>(*args.cached), .k_cache = Data<float>(*args.k_cache),
      .v_cache = Data<float>(*args.v_cache), .out = Data<float>(*args.out)};
  MCSERVE_ASSIGN_OR_RETURN(cudaStream_t stream, KernelStream());
  MCSERVE_LAUNCH(AttentionAppend, static_cast<unsigned>(num_seqs), kThreads, 0, stream)(p);
  MCSERVE_RETURN_IF_ERROR(::mcserve::kernels::MCSERVE_CUDA_NS::TakeLaunchStatus("AttentionAppend"));
  const size_t shared = static_cast<size_t>(capacity) * sizeof(float);
  MCSERVE_LAUNCH(AttentionAttend, static_cast<unsigned>(t * hq), kThreads, shared, stream)(p);
  return ::mcserve::kernels::MCSERVE_CUDA_NS::TakeLaunchStatus("AttentionAttend");
}

}  // namespace mcserve::kernels::internal::MCSERVE_CUDA_NS
