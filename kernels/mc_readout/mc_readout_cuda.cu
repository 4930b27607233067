// CUDA McReadout: one block per (token, state head); its threads own output columns v (strided) and
// score pages in parallel. The token's page list is walked in chunks of blockDim entries:
//   kSum:         y = online_weight·o_on, then y[v] += cached_weight·(Sᵢᵀq)[v] per page;
//   kSoftmax:     an online softmax ("attention over memories") seeded with the online memory:
//                 running max m (starts at z_on), denominator (starts at 1) and accumulator y (starts
//                 at o_on); per chunk the scores zᵢ = ⟨u, poolᵢ⟩ go to shared memory, m is raised,
//                 y and the denominator are rescaled by exp(m_old − m_new) and exp(zᵢ − m)·(Sᵢᵀq) is
//                 added; finally y /= denominator. No per-token array of all scores is kept.
//   kTopKSoftmax: the scores of the token's entries are written to a device scratch [Hs, P], each
//                 entry's rank (#entries ranking before it by RanksBefore: higher score, ties to the
//                 lower list position) marks the top_k, then the online softmax above runs over the
//                 kept entries only (dropped pages are never read).
// Results match the CPU up to fp32 reduction order (the CPU normalises weights before summing).
// Page tensors are given on the host as a span: their memory / pooled-key device pointers are copied
// to a small device array for the launch (freed after it). Device-side CSR values are validated on
// the host by McReadout (ValidateCsr), so the kernel trusts them.
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/core/tensor_data.h"
#include "kernels/cuda/cuda_compat.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/core/device_runtime.h"
#include "kernels/mc_readout/mc_readout.h"
#include "kernels/mc_readout/mc_readout_math.h"

namespace {

namespace math = ::mcserve::kernels::mc_readout_math;

constexpr int kSum = 0, kSoftmax = 1, kTopK = 2;

struct ReadoutParams {
  int combine;  // kSum / kSoftmax / kTopK
  int top_k;
  float online_weight, cached_weight;
  int64_t hs, p;
  int k, v;
  const float *q, *u, *online_pool, *online;  // [T, Hs, K] ×3, [T, Hs, V]
  float* out;                                 // [T, Hs, V] (may alias online)
  const int32_t *offsets, *token_pages;       // [T + 1], [P]
  const float* const* memory;                 // [num_pages] → [Hs, K, V]
  const float* const* pooled;                 // [num_pages] → [Hs, K] (softmax kinds)
  float* scores;                              // [Hs, P] scratch (kTopK)
  unsigned char* keep;                        // [Hs, P] scratch (kTopK)
};

// Launch: grid (T, Hs), block (B) with B a multiple of 32 (≤ 256); dynamic shared memory
// (K + 3·B)·4 bytes: q [K], chunk scores [B], chunk weights [B], chunk keep flags [B] (int).
__global__ void ReadoutKernel(ReadoutParams pr) {
  MCSERVE_DYNAMIC_SHARED(float, shared);
  __shared__ float s_z_on;
  const int nthreads = blockDim.x, tid = threadIdx.x;
  float* sq = shared;
  float* sz = sq + pr.k;
  float* sw = sz + nthreads;
  int* sk = reinterpret_cast<int*>(sw + nthreads);
  const int64_t h = blockIdx.y, row = static_cast<int64_t>(blockIdx.x) * pr.hs + h;
  const int64_t e0 = pr.offsets[blockIdx.x];
  const int n = pr.offsets[blockIdx.x + 1] - pr.offsets[blockIdx.x];
  const int K = pr.k, V = pr.v;
  const int64_t head_kv = h * K * V;
  for (int c = tid; c < K; c += nthreads) sq[c] = pr.q[row * K + c];
  const float* on = pr.online + row * V;
  float* y = pr.out + row * V;

  if (pr.combine == kSum) {
    __syncthreads();  // sq
    for (int j = tid; j < V; j += nthreads) {
      float a;
      math::ScaleOnline(on + j, pr.online_weight, 1, &a);
      if (pr.cached_weight != 0.0f) {
        for (int i = 0; i < n; ++i) {
          const float* S = pr.memory[pr.token_pages[e0 + i]] + head_kv;
          a += pr.cached_weight * math::ReadOutColumn(S, sq, K, V, j);
        }
      }
      y[j] = a;
    }
    return;
  }

  const float* u = pr.u + row * K;
  if (tid == 0) s_z_on = math::Dot(u, pr.online_pool + row * K, K);
  const bool top_k = pr.combine == kTopK;
  float* zs = top_k ? pr.scores + h * pr.p + e0 : nullptr;
  unsigned char* ks = top_k ? pr.keep + h * pr.p + e0 : nullptr;
  if (top_k) {
    for (int i = tid; i < n; i += nthreads) zs[i] = math::Dot(u, pr.pooled[pr.token_pages[e0 + i]] + h * K, K);
    __syncthreads();  // every score of the token written
    for (int i = tid; i < n; i += nthreads) {
      int rank = 0;
      if (n > pr.top_k) {
        for (int j = 0; j < n; ++j) rank += math::RanksBefore(zs[j], j, zs[i], i) ? 1 : 0;
      }
      ks[i] = rank < pr.top_k ? 1 : 0;
    }
  }
  __syncthreads();  // sq, s_z_on, keep flags

  float m = s_z_on, den = 1.0f;  // running max and denominator; the online memory's weight is exp(z_on − m)
  for (int j = tid; j < V; j += nthreads) y[j] = on[j];
  for (int base = 0; base < n; base += nthreads) {
    const int c = n - base < nthreads ? n - base : nthreads;
    if (tid < c) {
      const int i = base + tid;
      if (top_k) {
        sz[tid] = zs[i];
        sk[tid] = ks[i];
      } else {
        sz[tid] = math::Dot(u, pr.pooled[pr.token_pages[e0 + i]] + h * K, K);
        sk[tid] = 1;
      }
    }
    __syncthreads();  // chunk scores
    float m_new = m;
    for (int i = 0; i < c; ++i) {
      if (sk[i] != 0) m_new = fmaxf(m_new, sz[i]);
    }
    if (tid < c) sw[tid] = sk[tid] != 0 ? expf(sz[tid] - m_new) : 0.0f;
    __syncthreads();  // chunk weights
    const float scale = expf(m - m_new);
    float chunk_sum = 0.0f;
    for (int i = 0; i < c; ++i) chunk_sum += sw[i];
    den = den * scale + chunk_sum;
    m = m_new;
    for (int j = tid; j < V; j += nthreads) {
      float a = y[j] * scale;
      for (int i = 0; i < c; ++i) {
        if (sw[i] == 0.0f) continue;  // dropped by top-k (or underflowed): the page is not read
        const float* S = pr.memory[pr.token_pages[e0 + base + i]] + head_kv;
        a += sw[i] * math::ReadOutColumn(S, sq, K, V, j);
      }
      y[j] = a;
    }
    // No barrier needed here: the next chunk writes sz / sk only after this chunk's second barrier
    // (every max scan done) and sw only after its own first barrier (every read-out above done).
  }
  for (int j = tid; j < V; j += nthreads) y[j] = y[j] / den;
}

// Threads per block: V rounded up to a warp, at most 256.
unsigned ThreadsFor(int64_t v) {
  const int64_t warps = (v + 31) / 32;
  return static_cast<unsigned>(warps >= 8 ? 256 : 32 * (warps < 1 ? 1 : warps));
}

}  // namespace

namespace mcserve::kernels::internal::MCSERVE_CUDA_NS {

absl::Status McReadoutCuda(const Context& ctx, const McReadoutArgs& args) {
  const int64_t t = args.q->dim(0), hs = args.q->dim(1), k = args.q->dim(2), v = args.online->dim(2);
  const int64_t p = args.token_pages->dim(0), num_pages = static_cast<int64_t>(args.pages.size());
  if (t == 0 || hs == 0 || v == 0) return absl::OkStatus();
  const unsigned threads = ThreadsFor(v);
  const size_t shared_bytes = static_cast<size_t>(k + 3 * int64_t{threads}) * sizeof(float);
  if (shared_bytes > 48 * 1024 || t > 0x7fffffff || hs > 65535 || v > 0x7fffffff) {
    return absl::InvalidArgumentError(absl::StrCat("McReadout: T = ", t, ", Hs = ", hs, ", K = ", k, ", V = ", v,
                                                   " exceed the CUDA kernel's limits (K + 3·", threads,
                                                   " floats of shared memory ≤ 48 KiB, Hs ≤ 65535)"));
  }
  const bool softmax = args.combine != McCombine::kSum;
  MCSERVE_ASSIGN_OR_RETURN(DeviceRuntime * rt, RuntimeFor(MCSERVE_CUDA_EMULATED ? Device::kCudaEmu : Device::kCuda));

  // Page pointer table: memory [num_pages] then pooled keys [num_pages].
  DeviceBuffer table(rt);
  if (num_pages > 0) {
    std::vector<const float*> host(2 * num_pages, nullptr);
    for (int64_t i = 0; i < num_pages; ++i) {
      host[i] = Data<float>(*args.pages[i].memory);
      if (softmax) host[num_pages + i] = Data<float>(*args.pages[i].pooled_key);
    }
    const size_t bytes = host.size() * sizeof(const float*);
    MCSERVE_RETURN_IF_ERROR(table.Allocate(bytes));
    MCSERVE_RETURN_IF_ERROR(rt->CopyHostToDevice(table.get(), host.data(), bytes));
  }
  DeviceBuffer scratch(rt);
  if (args.combine == McCombine::kTopKSoftmax && p > 0) {
    MCSERVE_RETURN_IF_ERROR(scratch.Allocate(static_cast<size_t>(hs * p) * (sizeof(float) + 1)));
  }

  ReadoutParams pr{};
  pr.combine = args.combine == McCombine::kSum ? kSum : args.combine == McCombine::kSoftmax ? kSoftmax : kTopK;
  pr.top_k = args.top_k;
  pr.online_weight = args.online_weight;
  pr.cached_weight = args.cached_weight;
  pr.hs = hs;
  pr.p = p;
  pr.k = static_cast<int>(k);
  pr.v = static_cast<int>(v);
  pr.q = Data<float>(*args.q);
  pr.u = softmax ? Data<float>(*args.u) : nullptr;
  pr.online_pool = softmax ? Data<float>(*args.online_pool) : nullptr;
  pr.online = Data<float>(*args.online);
  pr.out = Data<float>(*args.out);
  pr.offsets = Data<int32_t>(*args.token_page_offsets);
  pr.token_pages = Data<int32_t>(*args.token_pages);
  const auto* ptrs = static_cast<const float* const*>(table.get());
  pr.memory = ptrs;
  pr.pooled = ptrs == nullptr ? nullptr : ptrs + num_pages;
  pr.scores = static_cast<float*>(scratch.get());
  pr.keep = scratch.get() == nullptr ? nullptr : reinterpret_cast<unsigned char*>(pr.scores + hs * p);

  MCSERVE_ASSIGN_OR_RETURN(cudaStream_t stream, ::mcserve::kernels::MCSERVE_CUDA_NS::KernelStream());
  MCSERVE_LAUNCH(ReadoutKernel, dim3(static_cast<unsigned>(t), static_cast<unsigned>(hs)), threads, shared_bytes,
                 stream)
  (pr);
  return ::mcserve::kernels::MCSERVE_CUDA_NS::TakeLaunchStatus("McReadout");
}

}  // namespace mcserve::kernels::internal::MCSERVE_CUDA_NS
