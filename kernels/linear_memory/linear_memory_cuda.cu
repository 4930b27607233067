// CUDA LinearMemory. Every rule's update is independent per value column j of a head's [K, V]
// memory: column j of S (and of the Titans momentum) only ever meets q, k, the gates and v[j]. So a
// thread owns one (sequence, state head, column) triple, keeps that column of S (K floats) and its
// aux column in thread-local arrays, walks the sequence's tokens in order, and calls the shared
// per-step math with V = 1 — every output gets exactly the CPU arithmetic. q, k (and GLA's key
// decay) of the current token are staged once per block in shared memory. The state is read
// through the slot id and written back in place at the end.
//
// The per-head parts of aux that all columns share — the normaliser z [K] (additive + normalize)
// and SWLA's previous key [K] — are read-only in the column kernel (each thread advances a private
// copy) and are advanced once by a second kernel launched after it on the same stream, so blocks of
// one head never race on them.
//
// The batch layout lives on the device and is checked here: a sequence whose rows fall outside
// [0, T) is skipped; one whose slot is outside [0, num_slots) gets NaN outputs and no state writes.
// K is limited to kMaxKLimit (thread-local columns); larger heads report Unimplemented.
#include <cstdint>

#include "base/status_macros.h"
#include "kernels/core/tensor_data.h"
#include "kernels/cuda/cuda_compat.h"
#include "kernels/linear_memory/linear_memory.h"
#include "kernels/linear_memory/linear_memory_math.h"

namespace {

using mcserve::kernels::LinearMemoryRule;

constexpr int kColumns = 64;      // value columns (threads) per block of the column kernel
constexpr int kAuxThreads = 128;  // threads of the aux kernel, striding over K
constexpr int kMaxKLimit = 256;

// Device pointers and sizes of one call. q [T, Hq, K], k [T, Hk, K], v [T, Hv, V], key_decay
// [T, Hk, K] or null, decay/beta/gamma [T, Hs] or null, cu [B + 1], slots [B], state [slots, Hs, K, V],
// aux per LinearMemoryArgs or null, out [T, Hs, V].
struct MemoryParams {
  LinearMemoryRule rule;
  bool normalize;
  int kd, vd;
  int64_t t, hq, hk, hv, hs, num_slots;
  const float *q, *k, *v, *key_decay, *decay, *beta, *gamma;
  const int32_t *cu, *slots;
  float *state, *aux, *out;
};

// Per-head aux size: z [K], (k, v)_prev [K + V], momentum [K, V].
__host__ __device__ inline int64_t AuxPerHead(const MemoryParams& p) {
  if (p.rule == LinearMemoryRule::kSwla) return p.kd + p.vd;
  if (p.rule == LinearMemoryRule::kTitans) return static_cast<int64_t>(p.kd) * p.vd;
  return p.kd;
}

// Rows [begin, end) of sequence b, or false when they fall outside [0, T).
__device__ inline bool SequenceRows(const MemoryParams& p, int64_t b, int64_t* begin, int64_t* end) {
  *begin = p.cu[b];
  *end = p.cu[b + 1];
  return *begin >= 0 && *end >= *begin && *end <= p.t;
}

// Launch: grid (B·Hs, ceil(V / kColumns)), block kColumns, static shared 3·kMaxK floats; thread =
// value column blockIdx.y·kColumns + threadIdx.x of (sequence, state head) blockIdx.x.
// kExactK: K == kMaxK, a compile-time constant, so the step math's loops unroll and the column
// stays in registers (else K ≤ kMaxK at run time, and the column lives in local memory). kRule ≥ 0:
// the rule as a constant (LinearMemoryRule), so a rule without a per-column aux keeps no aux array;
// -1: p.rule at run time.
template <int kMaxK, bool kExactK, int kRule = -1>
__global__ void __launch_bounds__(kColumns) LinearMemoryColumns(MemoryParams p) {
  __shared__ float q_s[kMaxK], k_s[kMaxK], a_s[kMaxK];
  const int64_t b = blockIdx.x / p.hs, h = blockIdx.x % p.hs;
  const int j = static_cast<int>(blockIdx.y) * kColumns + static_cast<int>(threadIdx.x);
  const bool active = j < p.vd;
  int64_t begin, end;
  if (!SequenceRows(p, b, &begin, &end)) return;  // uniform over the block
  const int K = kExactK ? kMaxK : p.kd, V = p.vd;
  const LinearMemoryRule rule = kRule < 0 ? p.rule : static_cast<LinearMemoryRule>(kRule);
  const int64_t qh = h / (p.hs / p.hq), kh = h / (p.hs / p.hk), vh = h / (p.hs / p.hv);
  const int64_t slot = p.slots[b];
  if (slot < 0 || slot >= p.num_slots) {
    if (active) {
      for (int64_t t = begin; t < end; ++t) p.out[(t * p.hs + h) * V + j] = __int_as_float(0x7fc00000);
    }
    return;
  }
  const int64_t sh = slot * p.hs + h;
  float* S = p.state + sh * K * V;
  float* A = p.aux != nullptr ? p.aux + sh * AuxPerHead(p) : nullptr;

  // This thread's column of S and of its aux: z or k_prev (shared by all columns) [K], then
  // v_prev[j] for SWLA; the momentum column for Titans.
  float s[kMaxK], a[kMaxK + 1];
  float scratch = 0.0f;
  if (active) {
    for (int i = 0; i < K; ++i) s[i] = S[static_cast<int64_t>(i) * V + j];
    if (rule == LinearMemoryRule::kTitans) {
      for (int i = 0; i < K; ++i) a[i] = A[static_cast<int64_t>(i) * V + j];
    } else if (A != nullptr) {
      for (int i = 0; i < K; ++i) a[i] = A[i];
      if (rule == LinearMemoryRule::kSwla) a[K] = A[K + j];
    }
  }

  for (int64_t t = begin; t < end; ++t) {
    __syncthreads();  // every thread is done with the previous token's q, k
    const float* qt = p.q + (t * p.hq + qh) * K;
    const float* kt = p.k + (t * p.hk + kh) * K;
    const float* at = p.key_decay != nullptr ? p.key_decay + (t * p.hk + kh) * K : nullptr;
    for (int i = threadIdx.x; i < K; i += blockDim.x) {
      q_s[i] = qt[i];
      k_s[i] = kt[i];
      if (at != nullptr) a_s[i] = at[i];
    }
    __syncthreads();
    if (!active) continue;
    const float vj = p.v[(t * p.hv + vh) * V + j];
    const int64_t th = t * p.hs + h;
    float o = 0.0f;
    switch (rule) {
      case LinearMemoryRule::kAdditive:
        mcserve::kernels::AdditiveStep(s, q_s, k_s, &vj, at != nullptr ? a_s : nullptr, K, 1, &o);
        if (p.normalize) mcserve::kernels::NormalizeStep(a, q_s, k_s, K, 1, &o);
        break;
      case LinearMemoryRule::kGatedDelta:
        mcserve::kernels::GatedDeltaStep(s, q_s, k_s, &vj, p.decay != nullptr ? p.decay[th] : 1.0f, p.beta[th], K, 1,
                                         &o, &scratch);
        break;
      case LinearMemoryRule::kSwla:
        mcserve::kernels::SwlaStep(s, q_s, k_s, &vj, p.decay[th], p.beta[th], p.gamma[th], K, 1, a, &o);
        break;
      case LinearMemoryRule::kTitans:
        mcserve::kernels::TitansStep(s, a, q_s, k_s, &vj, p.decay[th], p.beta[th], p.gamma[th], K, 1, &o, &scratch);
        break;
    }
    p.out[th * V + j] = o;
  }

  if (!active) return;
  for (int i = 0; i < K; ++i) S[static_cast<int64_t>(i) * V + j] = s[i];
  if (rule == LinearMemoryRule::kTitans) {
    for (int i = 0; i < K; ++i) A[static_cast<int64_t>(i) * V + j] = a[i];
  } else if (rule == LinearMemoryRule::kSwla) {
    A[K + j] = a[K];  // v_prev[j]; k_prev is written by LinearMemoryKeyAux
  }
}

// Advances the per-head key parts of aux after LinearMemoryColumns: z [K] += k_t for every token
// (additive + normalize, the same additions as NormalizeStep), or k_prev [K] = k of the last token
// (SWLA). Launch: grid B·Hs, block kAuxThreads striding over K, no shared memory.
__global__ void LinearMemoryKeyAux(MemoryParams p) {
  const int64_t b = blockIdx.x / p.hs, h = blockIdx.x % p.hs;
  int64_t begin, end;
  if (!SequenceRows(p, b, &begin, &end) || begin == end) return;
  const int64_t slot = p.slots[b];
  if (slot < 0 || slot >= p.num_slots) return;
  const int64_t kh = h / (p.hs / p.hk);
  float* A = p.aux + (slot * p.hs + h) * AuxPerHead(p);
  for (int i = threadIdx.x; i < p.kd; i += blockDim.x) {
    if (p.rule == LinearMemoryRule::kSwla) {
      A[i] = p.k[((end - 1) * p.hk + kh) * p.kd + i];
      continue;
    }
    float z = A[i];
    for (int64_t t = begin; t < end; ++t) z += p.k[(t * p.hk + kh) * p.kd + i];
    A[i] = z;
  }
}

const float* OptData(const mcserve::kernels::Tensor* t) {
  return t != nullptr ? mcserve::kernels::Data<float>(*t) : nullptr;
}

}  // namespace

namespace mcserve::kernels::internal::MCSERVE_CUDA_NS {

using ::mcserve::kernels::MCSERVE_CUDA_NS::KernelStream;

absl::Status LinearMemoryCuda(const Context& ctx, const LinearMemoryArgs& args) {
  const int64_t num_seqs = args.layout.slot_ids->dim(0);
  const int64_t hs = args.state->dim(1), kd = args.q->dim(2), vd = args.v->dim(2);
  if (num_seqs == 0) return absl::OkStatus();
  if (kd > kMaxKLimit) {
    return absl::UnimplementedError("LinearMemory: CUDA kernel supports key head dim K <= 256");
  }
  if (num_seqs * hs > 0x7fffffff || (vd + kColumns - 1) / kColumns > 65535) {
    return absl::InvalidArgumentError("LinearMemory: too many sequences, heads or value columns for one launch");
  }
  const MemoryParams p{
      .rule = args.rule, .normalize = args.normalize, .kd = static_cast<int>(kd), .vd = static_cast<int>(vd),
      .t = args.q->dim(0), .hq = args.q->dim(1), .hk = args.k->dim(1), .hv = args.v->dim(1), .hs = hs,
      .num_slots = args.state->dim(0), .q = Data<float>(*args.q), .k = Data<float>(*args.k),
      .v = Data<float>(*args.v), .key_decay = OptData(args.key_decay), .decay = OptData(args.decay),
      .beta = OptData(args.beta), .gamma = OptData(args.gamma), .cu = Data<int32_t>(*args.layout.cu_seqlens),
      .slots = Data<int32_t>(*args.layout.slot_ids), .state = Data<float>(*args.state),
      .aux = args.aux != nullptr ? Data<float>(*args.aux) : nullptr, .out = Data<float>(*args.out)};
  const unsigned heads = static_cast<unsigned>(num_seqs * hs);
  MCSERVE_ASSIGN_OR_RETURN(cudaStream_t stream, KernelStream());
  if (vd > 0) {
    const dim3 grid(heads, static_cast<unsigned>((vd + kColumns - 1) / kColumns));
    // The gated delta rule (gated DeltaNet) at K = 64 keeps its column in registers (168, no
    // stack; ptxas -v, sm_90). Exact-K kernels for the rules with a per-column aux, or K = 128,
    // spill more than the generic kernel's local arrays cost, so those stay generic.
    const bool delta64 = args.rule == LinearMemoryRule::kGatedDelta && kd == 64;
    constexpr int kDelta = static_cast<int>(LinearMemoryRule::kGatedDelta);
    auto* kernel = delta64     ? &LinearMemoryColumns<64, true, kDelta>
                   : kd <= 32  ? &LinearMemoryColumns<32, false>
                   : kd <= 64  ? &LinearMemoryColumns<64, false>
                   : kd <= 128 ? &LinearMemoryColumns<128, false>
                               : &LinearMemoryColumns<256, false>;
    MCSERVE_LAUNCH(kernel, grid, kColumns, 0, stream)(p);
    MCSERVE_RETURN_IF_ERROR(::mcserve::kernels::MCSERVE_CUDA_NS::TakeLaunchStatus("LinearMemoryColumns"));
  }
  const bool key_aux = (args.rule == LinearMemoryRule::kAdditive && args.normalize) ||
                       args.rule == LinearMemoryRule::kSwla;
  if (key_aux && kd > 0) {
    MCSERVE_LAUNCH(LinearMemoryKeyAux, heads, kAuxThreads, 0, stream)(p);
    return ::mcserve::kernels::MCSERVE_CUDA_NS::TakeLaunchStatus("LinearMemoryKeyAux");
  }
  return absl::OkStatus();
}

}  // namespace mcserve::kernels::internal::MCSERVE_CUDA_NS
