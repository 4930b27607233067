// CUDA DeepMcReadout: one block per (token, head). The gate scores of the token's entries are
// written by the block's threads to a device scratch [H, E] and turned into weights by thread 0 with
// the CPU's function (mc_readout_math::GateWeights: same scores, ties, top-k and softmax), so the
// gates match the CPU exactly. Then the memories are read with their rows streamed from global
// memory, a warp per row (deep_memory_warp.h):
//   kSum / kSoftmax / kTopKSoftmax: acc = γ_on·o_on; per entry with γ ≠ 0 (dropped SSC pages are
//     never read): z = c·W2·q → σ → y = c·W1·h, acc += γ·(q + N(y)); two barriers per page.
//   kSoup: z* = γ_on·W2_on·q + Σ γ·c·W2·q (a warp owns the same rows for every memory, so no barrier
//     between memories), h* = σ(z*), y* = γ_on·W1_on·h* + Σ γ·c·W1·h*, out = q + N(y*).
// N (a layer norm) runs on thread 0 with the CPU's serial math. Page tensors are given on the host as
// a span: their memory / pooled-key pointers and weight scales are copied to a small device table
// for the launch. CSR values are validated on the host (ValidateCsr). kSoup's layout lives on the
// device: a token no sequence covers, or whose slot is outside [0, num_slots), gets NaN outputs.
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/core/tensor_data.h"
#include "kernels/cuda/cuda_compat.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/core/device_runtime.h"
#include "kernels/deep_memory/deep_mc_readout.h"
#include "kernels/deep_memory/deep_memory_math.h"
#include "kernels/deep_memory/deep_memory_warp.h"
#include "kernels/mc_readout/mc_readout_math.h"

namespace {

namespace math = ::mcserve::kernels::deep_memory_math;
using ::mcserve::kernels::MCSERVE_CUDA_NS::deep_memory::WarpDot;

constexpr int kSum = 0, kSoftmax = 1, kTopK = 2, kSoup = 3;
constexpr int kMaxThreads = 256;
constexpr size_t kMaxSharedBytes = 48 * 1024;

struct ReadoutParams {
  int combine;  // kSum / kSoftmax / kTopK / kSoup
  bool silu;    // σ = SiLU, else exact GELU
  int top_k;
  float online_weight, cached_weight, eps;
  int d, e;
  int64_t t, hs, p, entries;
  const float *q, *u, *online_pool, *online;  // [T, H, d] ×4 (u, online_pool: gated kinds; online: optional for kSoup)
  const float *ln_w, *ln_b;                   // [H, d] or null
  const float* online_memory;                 // kSoup: [num_slots, H, P]
  const int32_t *cu, *slots;                  // kSoup: [B + 1], [B]
  int64_t num_seqs, num_slots;                // kSoup
  float* out;                                 // [T, H, d] (may alias online)
  const int32_t *offsets, *token_pages;       // [T + 1], [E]
  const float* const* memory;                 // [num_pages] → [H, P]
  const float* const* pooled;                 // [num_pages] → [H, d] (gated kinds)
  const float* scale;                         // [num_pages] weight_scale
  float* gamma;                               // [H, E] scratch: scores, then weights
  unsigned char* keep;                        // [H, E] scratch (kTopK)
};

// The slot of token t's sequence (kSoup), or −1 when no sequence covers t or the slot is out of range.
__device__ int64_t TokenSlot(const ReadoutParams& p, int64_t t) {
  int64_t lo = 0, hi = p.num_seqs;  // last sequence b with cu[b] <= t
  while (hi - lo > 1) {
    const int64_t mid = (lo + hi) / 2;
    if (p.cu[mid] <= t) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  if (p.num_seqs == 0 || t < p.cu[lo] || t >= p.cu[lo + 1]) return -1;
  const int64_t slot = p.slots[lo];
  return slot >= 0 && slot < p.num_slots ? slot : -1;
}

// Launch: grid (T, H), block a multiple of 32 (≤ 256); dynamic shared (3·d + e)·4 bytes: q, acc, y [d],
// z [e].
__global__ void DeepReadoutKernel(ReadoutParams p) {
  MCSERVE_DYNAMIC_SHARED(float, shared);
  __shared__ float s_gamma_on;
  const int d = p.d, e = p.e;
  float *q_s = shared, *acc_s = q_s + d, *y_s = acc_s + d, *z_s = y_s + d;
  const int tid = threadIdx.x, nthreads = blockDim.x, warp = tid / 32, lane = tid % 32, nwarps = nthreads / 32;
  const int64_t t = blockIdx.x, h = blockIdx.y, row = t * p.hs + h;
  const int64_t x0 = p.offsets[t];
  const int n = p.offsets[t + 1] - p.offsets[t];
  const int64_t ed = static_cast<int64_t>(e) * d;
  const float* ln_w = p.ln_w != nullptr ? p.ln_w + h * d : nullptr;
  const float* ln_b = p.ln_b != nullptr ? p.ln_b + h * d : nullptr;
  float* out = p.out + row * d;
  float* gamma = p.gamma + h * p.entries + x0;
  const float* W_on = nullptr;
  if (p.combine == kSoup && p.online != nullptr && n == 0) {  // no page: o_on exactly (uniform over the block)
    for (int c = tid; c < d; c += nthreads) out[c] = p.online[row * d + c];
    return;
  }
  if (p.combine == kSoup) {
    const int64_t slot = TokenSlot(p, t);
    if (slot < 0) {  // uniform over the block
      for (int c = tid; c < d; c += nthreads) out[c] = __int_as_float(0x7fc00000);
      return;
    }
    W_on = p.online_memory + (slot * p.hs + h) * p.p;
  }
  for (int c = tid; c < d; c += nthreads) q_s[c] = p.q[row * d + c];

  // Gate weights: scores by all threads, then the CPU's GateWeights on thread 0.
  const float* u = p.combine != kSum ? p.u + row * d : nullptr;
  for (int i = tid; i < n; i += nthreads) {
    gamma[i] = p.combine == kSum ? p.cached_weight
                                 : mcserve::kernels::mc_readout_math::Dot(
                                       u, p.pooled[p.token_pages[x0 + i]] + h * d, d);
  }
  __syncthreads();
  if (tid == 0) {
    if (p.combine == kSum) {
      s_gamma_on = p.online_weight;
    } else {
      const float z_on = mcserve::kernels::mc_readout_math::Dot(u, p.online_pool + row * d, d);
      s_gamma_on = mcserve::kernels::mc_readout_math::GateWeights(gamma, n, z_on, p.combine == kTopK ? p.top_k : 0,
                                                                  p.keep + h * p.entries + x0);
    }
  }
  __syncthreads();
  const float g_on = s_gamma_on;

  if (p.combine != kSoup) {
    for (int c = tid; c < d; c += nthreads) acc_s[c] = g_on * p.online[row * d + c];
    for (int i = 0; i < n; ++i) {
      const float g = gamma[i];  // the same value in every thread: a uniform branch
      if (g == 0.0f) continue;
      const int32_t page = p.token_pages[x0 + i];
      const float* W2 = p.memory[page] + h * p.p;
      const float c = p.scale[page];
      for (int r = warp; r < e; r += nwarps) {
        const float z = WarpDot(W2 + static_cast<int64_t>(r) * d, q_s, d);
        if (lane == 0) z_s[r] = math::Activate(p.silu, c * z);
      }
      __syncthreads();
      for (int j = warp; j < d; j += nwarps) {
        const float y = WarpDot(W2 + ed + static_cast<int64_t>(j) * e, z_s, e);
        if (lane == 0) y_s[j] = c * y;
      }
      __syncthreads();
      if (ln_w == nullptr) {
        for (int j = tid; j < d; j += nthreads) acc_s[j] += g * (q_s[j] + y_s[j]);
      } else if (tid == 0) {
        math::AccumulateOutput(q_s, y_s, ln_w, ln_b, p.eps, d, g, y_s, acc_s);
      }
      // No barrier: the next page writes z_s (read by the y pass, behind this page's second barrier)
      // and y_s only after its own first barrier, which every accumulating thread reaches first.
    }
    __syncthreads();  // acc_s complete (also with no entry)
    for (int j = tid; j < d; j += nthreads) out[j] = acc_s[j];
    return;
  }

  // kSoup, first layer: z* = γ_on·W2_on·q + Σ γ·c·W2·q; warp w owns rows w, w + nwarps, ... throughout.
  __syncthreads();  // q_s
  for (int r = warp; r < e; r += nwarps) {
    const float z = WarpDot(W_on + static_cast<int64_t>(r) * d, q_s, d);
    if (lane == 0) z_s[r] = g_on * z;
  }
  for (int i = 0; i < n; ++i) {
    const float g = gamma[i];
    if (g == 0.0f) continue;
    const int32_t page = p.token_pages[x0 + i];
    const float* W2 = p.memory[page] + h * p.p;
    const float gc = g * p.scale[page];
    for (int r = warp; r < e; r += nwarps) {
      const float z = WarpDot(W2 + static_cast<int64_t>(r) * d, q_s, d);
      if (lane == 0) z_s[r] += gc * z;
    }
  }
  __syncthreads();
  for (int r = tid; r < e; r += nthreads) z_s[r] = math::Activate(p.silu, z_s[r]);  // h*
  __syncthreads();
  // Second layer: y* = γ_on·W1_on·h* + Σ γ·c·W1·h*.
  for (int j = warp; j < d; j += nwarps) {
    const float y = WarpDot(W_on + ed + static_cast<int64_t>(j) * e, z_s, e);
    if (lane == 0) acc_s[j] = g_on * y;
  }
  for (int i = 0; i < n; ++i) {
    const float g = gamma[i];
    if (g == 0.0f) continue;
    const int32_t page = p.token_pages[x0 + i];
    const float* W1 = p.memory[page] + h * p.p + ed;
    const float gc = g * p.scale[page];
    for (int j = warp; j < d; j += nwarps) {
      const float y = WarpDot(W1 + static_cast<int64_t>(j) * e, z_s, e);
      if (lane == 0) acc_s[j] += gc * y;
    }
  }
  __syncthreads();
  if (ln_w == nullptr) {
    for (int j = tid; j < d; j += nthreads) out[j] = q_s[j] + acc_s[j];
  } else if (tid == 0) {
    math::FinishOutput(q_s, acc_s, ln_w, ln_b, p.eps, d, out);
  }
}

}  // namespace

namespace mcserve::kernels::internal::MCSERVE_CUDA_NS {

absl::Status DeepMcReadoutCuda(const Context& ctx, const DeepMcReadoutArgs& args) {
  const int64_t t = args.q->dim(0), hs = args.q->dim(1), d = args.q->dim(2), e = args.expansion * d;
  const int64_t entries = args.token_pages->dim(0), num_pages = static_cast<int64_t>(args.pages.size());
  if (t == 0 || hs == 0 || d == 0) return absl::OkStatus();
  const size_t shared_bytes = static_cast<size_t>(3 * d + e) * sizeof(float);
  if (shared_bytes > kMaxSharedBytes || t > 0x7fffffff || hs > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("DeepMcReadout: T = ", t, ", H = ", hs, ", d = ", d, ", e = ", e,
                                                   " exceed the CUDA kernel's limits ((3·d + e) floats of shared "
                                                   "memory ≤ 48 KiB, H ≤ 65535)"));
  }
  const bool gated = args.combine != DeepMcCombine::kSum;
  const bool soup = args.combine == DeepMcCombine::kSoup;
  MCSERVE_ASSIGN_OR_RETURN(DeviceRuntime * rt, RuntimeFor(MCSERVE_CUDA_EMULATED ? Device::kCudaEmu : Device::kCuda));

  // Page table: memory pointers [num_pages], pooled-key pointers [num_pages], then scales [num_pages].
  DeviceBuffer table(rt);
  const size_t ptr_bytes = 2 * num_pages * sizeof(const float*);
  if (num_pages > 0) {
    std::vector<unsigned char> host(ptr_bytes + num_pages * sizeof(float));
    std::vector<const float*> ptrs(2 * num_pages, nullptr);
    std::vector<float> scales(num_pages);
    for (int64_t i = 0; i < num_pages; ++i) {
      ptrs[i] = Data<float>(*args.pages[i].memory);
      if (gated) ptrs[num_pages + i] = Data<float>(*args.pages[i].pooled_key);
      scales[i] = args.pages[i].weight_scale;
    }
    std::memcpy(host.data(), ptrs.data(), ptr_bytes);
    std::memcpy(host.data() + ptr_bytes, scales.data(), num_pages * sizeof(float));
    MCSERVE_RETURN_IF_ERROR(table.Allocate(host.size()));
    MCSERVE_RETURN_IF_ERROR(rt->CopyHostToDevice(table.get(), host.data(), host.size()));
  }
  DeviceBuffer scratch(rt);
  if (entries > 0) MCSERVE_RETURN_IF_ERROR(scratch.Allocate(static_cast<size_t>(hs * entries) * (sizeof(float) + 1)));

  const auto opt = [](const Tensor* x) { return x != nullptr ? Data<float>(*x) : nullptr; };
  ReadoutParams p{};
  p.combine = args.combine == DeepMcCombine::kSum           ? kSum
              : args.combine == DeepMcCombine::kSoftmax     ? kSoftmax
              : args.combine == DeepMcCombine::kTopKSoftmax ? kTopK
                                                            : kSoup;
  p.silu = args.activation == ::mcserve::kernels::DeepMcActivation::kSilu;
  p.top_k = args.top_k;
  p.online_weight = args.online_weight;
  p.cached_weight = args.cached_weight;
  p.eps = args.ln_eps;
  p.d = static_cast<int>(d);
  p.e = static_cast<int>(e);
  p.t = t;
  p.hs = hs;
  p.p = 2 * e * d;
  p.entries = entries;
  p.q = Data<float>(*args.q);
  p.u = gated ? opt(args.u) : nullptr;
  p.online_pool = gated ? opt(args.online_pool) : nullptr;
  p.online = opt(args.online);
  p.ln_w = opt(args.ln_weight);
  p.ln_b = opt(args.ln_bias);
  p.online_memory = opt(args.online_memory);
  if (soup) {
    p.cu = Data<int32_t>(*args.layout.cu_seqlens);
    p.slots = Data<int32_t>(*args.layout.slot_ids);
    p.num_seqs = args.layout.slot_ids->dim(0);
    p.num_slots = args.online_memory->dim(0);
  }
  p.out = Data<float>(*args.out);
  p.offsets = Data<int32_t>(*args.token_page_offsets);
  p.token_pages = Data<int32_t>(*args.token_pages);
  auto* base = static_cast<unsigned char*>(table.get());
  p.memory = reinterpret_cast<const float* const*>(base);
  p.pooled = base == nullptr ? nullptr : reinterpret_cast<const float* const*>(base) + num_pages;
  p.scale = base == nullptr ? nullptr : reinterpret_cast<const float*>(base + ptr_bytes);
  p.gamma = static_cast<float*>(scratch.get());
  p.keep = scratch.get() == nullptr ? nullptr : reinterpret_cast<unsigned char*>(p.gamma + hs * entries);

  const int64_t warps = (e + 31) / 32;
  const unsigned threads = static_cast<unsigned>(warps >= kMaxThreads / 32 ? kMaxThreads : 32 * warps);
  MCSERVE_ASSIGN_OR_RETURN(cudaStream_t stream, ::mcserve::kernels::MCSERVE_CUDA_NS::KernelStream());
  MCSERVE_LAUNCH(DeepReadoutKernel, dim3(static_cast<unsigned>(t), static_cast<unsigned>(hs)), threads, shared_bytes,
                 stream)
  (p);
  return ::mcserve::kernels::MCSERVE_CUDA_NS::TakeLaunchStatus("DeepMcReadout");
}

}  // namespace mcserve::kernels::internal::MCSERVE_CUDA_NS
