// CUDA DeepMemory: one block per (sequence, head) walks the sequence's tokens in order. A head's
// weights (P = 2·e·d floats: 128 KB at d = 64) stay in global memory and are streamed row by row,
// a warp per row (deep_memory_warp.h); the per-token vectors live in shared memory. Per token:
//   (b > 1, chunk start) anchor ← θ (block-strided copy);
//   z = G2·k, h = GELU(z)            warp per row of G2 [e, d]   (G = the anchor, or θ when b = 1)
//   y = G1·h                         warp per row of G1 [d, e]
//   dy = OutputGrad(y, k, v)         thread 0 (d-long serial math, the CPU's function)
//   dz = (G1ᵀ·dy) ⊙ GELU'(z)          thread per column of G1
//   W2 row r += update(dz_r·k), then zq_r = ⟨W2 row r, q⟩, hq = GELU(zq)      warp per row
//   W1 row j += update(dy_j·h), then yq_j = ⟨W1 row j, hq⟩                    warp per row
//   out = q + N(yq)                  thread 0 with a layer norm, else block-strided
// with six barriers per token. The per-weight update is the CPU's (deep_memory_math.h); dot
// products sum in a different order (lanes, then an xor butterfly), so results match the CPU to
// rounding. The batch layout and inner_offset live on the device and are checked here: a sequence
// whose rows fall outside [0, T) is skipped; one whose slot is outside [0, num_slots) or whose
// inner_offset is outside [0, b) gets NaN outputs and no state writes.
// DeepMemoryAccumulate: grid (⌈H·P / 256⌉ capped, B) × 256, grid-stride adds; bad slots skipped.
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/core/tensor_data.h"
#include "kernels/cuda/cuda_compat.h"
#include "kernels/deep_memory/deep_memory.h"
#include "kernels/deep_memory/deep_memory_math.h"
#include "kernels/deep_memory/deep_memory_warp.h"

namespace {

namespace math = ::mcserve::kernels::deep_memory_math;
using ::mcserve::kernels::MCSERVE_CUDA_NS::deep_memory::WarpDot;
using ::mcserve::kernels::MCSERVE_CUDA_NS::deep_memory::WarpSum;

constexpr int kMaxThreads = 256;
constexpr size_t kMaxSharedBytes = 48 * 1024;

// Device pointers and sizes of one call. q, k, v, out [T, H, d]; step, alpha, beta [T, H] (alpha,
// beta null for DLA); ln_w, ln_b [H, d] or null; cu [B + 1], slots [B], offsets [B] (null when b = 1);
// memory, momentum (Titans), anchor (b > 1) [num_slots, H, P].
struct ScanParams {
  bool titans;
  int d, e, chunk;
  float eps;
  int64_t t, heads, num_slots, p;
  const float *q, *k, *v, *step, *alpha, *beta, *ln_w, *ln_b;
  const int32_t *cu, *slots, *offsets;
  float *memory, *momentum, *anchor, *out;
};

// Launch: grid B·H, block a multiple of 32 (≤ 256); dynamic shared (6·d + 4·e)·4 bytes: q, k, v, y,
// dy, yq [d], then z, h, dz, hq [e].
__global__ void DeepMemoryScan(ScanParams p) {
  MCSERVE_DYNAMIC_SHARED(float, shared);
  const int d = p.d, e = p.e;
  float *q_s = shared, *k_s = q_s + d, *v_s = k_s + d, *y_s = v_s + d, *dy_s = y_s + d, *yq_s = dy_s + d;
  float *z_s = yq_s + d, *h_s = z_s + e, *dz_s = h_s + e, *hq_s = dz_s + e;
  const int tid = threadIdx.x, nthreads = blockDim.x, warp = tid / 32, lane = tid % 32, nwarps = nthreads / 32;
  const int64_t b = blockIdx.x / p.heads, hd = blockIdx.x % p.heads;
  const int64_t begin = p.cu[b], end = p.cu[b + 1];
  if (begin < 0 || end < begin || end > p.t) return;  // uniform over the block
  const int64_t slot = p.slots[b];
  const int64_t off = p.chunk > 1 ? p.offsets[b] : 0;
  if (slot < 0 || slot >= p.num_slots || off < 0 || off >= p.chunk) {
    for (int64_t t = begin; t < end; ++t) {
      for (int c = tid; c < d; c += nthreads) p.out[(t * p.heads + hd) * d + c] = __int_as_float(0x7fc00000);
    }
    return;
  }
  const int64_t sh = slot * p.heads + hd, ed = static_cast<int64_t>(e) * d;
  float* W2 = p.memory + sh * p.p;
  float* W1 = W2 + ed;
  float* S2 = p.titans ? p.momentum + sh * p.p : nullptr;
  float* S1 = p.titans ? S2 + ed : nullptr;
  float* A = p.chunk > 1 ? p.anchor + sh * p.p : nullptr;
  const float* G2 = p.chunk > 1 ? A : W2;  // the weights gradients are taken at
  const float* G1 = G2 + ed;
  const float* ln_w = p.ln_w != nullptr ? p.ln_w + hd * d : nullptr;
  const float* ln_b = p.ln_b != nullptr ? p.ln_b + hd * d : nullptr;

  for (int64_t t = begin; t < end; ++t) {
    const int64_t row = t * p.heads + hd;
    __syncthreads();  // every thread is done with the previous token's vectors
    for (int c = tid; c < d; c += nthreads) {
      q_s[c] = p.q[row * d + c];
      k_s[c] = p.k[row * d + c];
      v_s[c] = p.v[row * d + c];
    }
    if (p.chunk > 1 && (off + (t - begin)) % p.chunk == 0) {
      for (int64_t x = tid; x < p.p; x += nthreads) A[x] = W2[x];
    }
    __syncthreads();
    for (int r = warp; r < e; r += nwarps) {  // z = G2·k
      const float z = WarpDot(G2 + static_cast<int64_t>(r) * d, k_s, d);
      if (lane == 0) {
        z_s[r] = z;
        h_s[r] = math::Gelu(z);
      }
    }
    __syncthreads();
    for (int j = warp; j < d; j += nwarps) {  // y = G1·h
      const float y = WarpDot(G1 + static_cast<int64_t>(j) * e, h_s, e);
      if (lane == 0) y_s[j] = y;
    }
    __syncthreads();
    if (tid == 0) math::OutputGrad(p.titans, y_s, k_s, v_s, ln_w, ln_b, p.eps, d, dy_s);
    __syncthreads();
    for (int c = tid; c < e; c += nthreads) {  // dz = (G1ᵀ·dy) ⊙ GELU'(z), a column per thread
      float acc = 0.0f;
      for (int j = 0; j < d; ++j) acc += dy_s[j] * G1[static_cast<int64_t>(j) * e + c];
      dz_s[c] = acc * math::GeluGrad(z_s[c]);
    }
    __syncthreads();
    const float eta = p.step[row];
    const float alpha = p.titans ? p.alpha[row] : 1.0f, beta = p.titans ? p.beta[row] : 0.0f;
    for (int r = warp; r < e; r += nwarps) {  // W2 += update(dz kᵀ), then zq = W2·q
      const int64_t o = static_cast<int64_t>(r) * d;
      const float gr = dz_s[r];
      float acc = 0.0f;
      for (int c = lane; c < d; c += 32) {
        const float w = p.titans ? math::TitansUpdate(W2[o + c], S2 + o + c, alpha, beta, eta, gr, k_s[c])
                                 : math::DlaUpdate(W2[o + c], eta, gr, k_s[c]);
        W2[o + c] = w;
        acc += w * q_s[c];
      }
      acc = WarpSum(acc);
      if (lane == 0) hq_s[r] = math::Gelu(acc);
    }
    __syncthreads();
    for (int j = warp; j < d; j += nwarps) {  // W1 += update(dy hᵀ), then yq = W1·hq
      const int64_t o = static_cast<int64_t>(j) * e;
      const float gr = dy_s[j];
      float acc = 0.0f;
      for (int c = lane; c < e; c += 32) {
        const float w = p.titans ? math::TitansUpdate(W1[o + c], S1 + o + c, alpha, beta, eta, gr, h_s[c])
                                 : math::DlaUpdate(W1[o + c], eta, gr, h_s[c]);
        W1[o + c] = w;
        acc += w * hq_s[c];
      }
      acc = WarpSum(acc);
      if (lane == 0) yq_s[j] = acc;
    }
    __syncthreads();
    float* out = p.out + row * d;
    if (ln_w == nullptr) {
      for (int c = tid; c < d; c += nthreads) out[c] = q_s[c] + yq_s[c];
    } else if (tid == 0) {
      math::FinishOutput(q_s, yq_s, ln_w, ln_b, p.eps, d, out);
    }
  }
}

// sum[slots[b]] += memory[slots[b]] over n = H·P floats; grid (x, B), grid-stride over x.
__global__ void DeepMemoryAdd(const float* memory, const int32_t* slots, int64_t num_slots, int64_t n, float* sum) {
  const int64_t slot = slots[blockIdx.y];
  if (slot < 0 || slot >= num_slots) return;
  const float* src = memory + slot * n;
  float* dst = sum + slot * n;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dst[i] += src[i];
  }
}

const float* OptData(const mcserve::kernels::Tensor* t) {
  return t != nullptr ? mcserve::kernels::Data<float>(*t) : nullptr;
}

}  // namespace

namespace mcserve::kernels::internal::MCSERVE_CUDA_NS {

using ::mcserve::kernels::MCSERVE_CUDA_NS::KernelStream;
using ::mcserve::kernels::MCSERVE_CUDA_NS::TakeLaunchStatus;

absl::Status DeepMemoryCuda(const Context& ctx, const DeepMemoryArgs& args) {
  const int64_t num_seqs = args.layout.slot_ids->dim(0), heads = args.q->dim(1), d = args.q->dim(2);
  if (num_seqs == 0 || heads == 0 || args.q->dim(0) == 0 || d == 0) return absl::OkStatus();
  const int64_t e = args.expansion * d;
  const size_t shared_bytes = static_cast<size_t>(6 * d + 4 * e) * sizeof(float);
  if (shared_bytes > kMaxSharedBytes || num_seqs * heads > 0x7fffffff) {
    return absl::InvalidArgumentError(absl::StrCat("DeepMemory: d = ", d, ", e = ", e, ", B·H = ", num_seqs * heads,
                                                   " exceed the CUDA kernel's limits ((6·d + 4·e) floats of "
                                                   "shared memory ≤ 48 KiB, B·H < 2³¹)"));
  }
  ScanParams p{};
  p.titans = args.rule == DeepMemoryRule::kTitans;
  p.d = static_cast<int>(d);
  p.e = static_cast<int>(e);
  p.chunk = args.inner_chunk_size;
  p.eps = args.ln_eps;
  p.t = args.q->dim(0);
  p.heads = heads;
  p.num_slots = args.memory->dim(0);
  p.p = args.memory->dim(2);
  p.q = Data<float>(*args.q);
  p.k = Data<float>(*args.k);
  p.v = Data<float>(*args.v);
  p.step = Data<float>(*args.step);
  p.alpha = OptData(args.retention);
  p.beta = OptData(args.momentum_gate);
  p.ln_w = OptData(args.ln_weight);
  p.ln_b = OptData(args.ln_bias);
  p.cu = Data<int32_t>(*args.layout.cu_seqlens);
  p.slots = Data<int32_t>(*args.layout.slot_ids);
  p.offsets = p.chunk > 1 ? Data<int32_t>(*args.inner_offset) : nullptr;
  p.memory = Data<float>(*args.memory);
  p.momentum = args.momentum != nullptr ? Data<float>(*args.momentum) : nullptr;
  p.anchor = args.anchor != nullptr ? Data<float>(*args.anchor) : nullptr;
  p.out = Data<float>(*args.out);
  const int64_t warps = (e + 31) / 32;
  const unsigned threads = static_cast<unsigned>(warps >= kMaxThreads / 32 ? kMaxThreads : 32 * warps);
  MCSERVE_ASSIGN_OR_RETURN(cudaStream_t stream, KernelStream());
  MCSERVE_LAUNCH(DeepMemoryScan, static_cast<unsigned>(num_seqs * heads), threads, shared_bytes, stream)(p);
  return TakeLaunchStatus("DeepMemoryScan");
}

absl::Status DeepMemoryAccumulateCuda(const Context& ctx, const DeepMemoryAccumulateArgs& args) {
  const int64_t num_seqs = args.slot_ids->dim(0), n = args.memory->dim(1) * args.memory->dim(2);
  if (num_seqs == 0 || n == 0) return absl::OkStatus();
  if (num_seqs > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("DeepMemoryAccumulate: ", num_seqs, " slots (CUDA limit 65535)"));
  }
  const int64_t blocks = (n + kMaxThreads - 1) / kMaxThreads;
  const dim3 grid(static_cast<unsigned>(blocks < 1024 ? blocks : 1024), static_cast<unsigned>(num_seqs));
  MCSERVE_ASSIGN_OR_RETURN(cudaStream_t stream, KernelStream());
  MCSERVE_LAUNCH(DeepMemoryAdd, grid, kMaxThreads, 0, stream)
  (Data<float>(*args.memory), Data<int32_t>(*args.slot_ids), args.memory->dim(0), n, Data<float>(*args.sum));
  return TakeLaunchStatus("DeepMemoryAccumulate");
}

}  // namespace mcserve::kernels::internal::MCSERVE_CUDA_NS
