// CPU DeepMemory: tasks are (sequence, head) pairs run in parallel on the pool; a task walks its
// tokens in order against that head's weights (P = 2·e·d floats, which stay in cache across tokens).
// b = 1: per token, the gradient at the current weights by vectorised GEMV loops, then the update
// fused with the read-out, one pass over each weight row. b > 1: per inner chunk (the anchor set to
// the current weights at its start when the chunk starts in this call), the forward and backward of
// all the chunk's tokens at the anchor as three sgemms — Z = K·W2ᵀ, Y = GELU(Z)·W1ᵀ, dH = dY·W1 — then
// the same per-token scan of updates and read-outs. DeepMemoryAccumulate is a plain parallel add.
#include <cblas.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/core/tensor_data.h"
#include "kernels/cpu/scratch.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/deep_memory/deep_memory.h"
#include "kernels/deep_memory/deep_memory_math.h"

namespace mcserve::kernels::internal {
namespace {

namespace math = deep_memory_math;

// Inner chunks with fewer tokens than this take the gradient by GEMV loops instead of sgemm.
constexpr int64_t kMinGemmRows = 2;

// Everything a task reads, resolved once.
struct Problem {
  bool titans;
  int d, e, chunk;
  float eps;
  int64_t heads, p;
  const float *q, *k, *v, *step, *alpha, *beta, *ln_w, *ln_b;  // ln_w/ln_b [H, d] or null
  const int32_t *cu, *slots, *offsets;                         // offsets null when b = 1
  float *memory, *momentum, *anchor, *out;
};

// Per-task buffers: rows × e for z, GELU(z), dz; rows × d for y, dy; the read-out's e + d.
// Views of the thread's loop-body scratch (cpu::ThreadScratch).
struct Scratch {
  std::span<float> z, h, dz, y, dy, hq, yq;
  Scratch(int64_t rows, int d, int e) {
    cpu::ScratchCarver c(cpu::ThreadScratch(3 * rows * e + 2 * rows * d + e + d));
    z = c.Take(rows * e), h = c.Take(rows * e), dz = c.Take(rows * e);
    y = c.Take(rows * d), dy = c.Take(rows * d), hq = c.Take(e), yq = c.Take(d);
  }
};

const float* LnRow(const float* ln, int64_t head, int d) { return ln != nullptr ? ln + head * d : nullptr; }

// Row i of the chunk's scratch receives, for token t (head hd) at weights G [P]: z = G2·k, h = GELU(z),
// y = G1·h, dy (math::OutputGrad), dz = (G1ᵀ·dy) ⊙ GELU'(z). GEMV loops.
void GradientLoop(const Problem& pr, const float* G, int64_t t, int64_t hd, int64_t i, Scratch& sc) {
  const int d = pr.d, e = pr.e;
  const float* W2 = G;
  const float* W1 = G + static_cast<int64_t>(e) * d;
  const int64_t row = t * pr.heads + hd;
  const float* k = pr.k + row * d;
  float *z = sc.z.data() + i * e, *h = sc.h.data() + i * e, *dz = sc.dz.data() + i * e;
  float *y = sc.y.data() + i * d, *dy = sc.dy.data() + i * d;
  for (int r = 0; r < e; ++r) {
    z[r] = math::Dot(W2 + static_cast<int64_t>(r) * d, k, d);
    h[r] = math::Gelu(z[r]);
  }
  for (int j = 0; j < d; ++j) y[j] = math::Dot(W1 + static_cast<int64_t>(j) * e, h, e);
  math::OutputGrad(pr.titans, y, k, pr.v + row * d, LnRow(pr.ln_w, hd, d), LnRow(pr.ln_b, hd, d), pr.eps, d, dy);
  std::fill(dz, dz + e, 0.0f);
  for (int j = 0; j < d; ++j) {
    const float* w = W1 + static_cast<int64_t>(j) * e;
    const float g = dy[j];
    for (int r = 0; r < e; ++r) dz[r] += g * w[r];
  }
  for (int r = 0; r < e; ++r) dz[r] *= math::GeluGrad(z[r]);
}

// The same for the n tokens t0 .. t0 + n − 1 at once (rows 0 .. n − 1), as sgemms.
void GradientGemm(const Problem& pr, const float* G, int64_t t0, int64_t n, int64_t hd, Scratch& sc) {
  const int d = pr.d, e = pr.e, m = static_cast<int>(n);
  const int ld = static_cast<int>(pr.heads * d);  // consecutive tokens of one head in k, v
  const float* W2 = G;
  const float* W1 = G + static_cast<int64_t>(e) * d;
  const float* K = pr.k + (t0 * pr.heads + hd) * d;
  const float* V = pr.v + (t0 * pr.heads + hd) * d;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, e, d, 1.0f, K, ld, W2, d, 0.0f, sc.z.data(), e);
  for (int64_t i = 0; i < n * e; ++i) sc.h[i] = math::Gelu(sc.z[i]);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, d, e, 1.0f, sc.h.data(), e, W1, e, 0.0f, sc.y.data(), d);
  const float *ln_w = LnRow(pr.ln_w, hd, d), *ln_b = LnRow(pr.ln_b, hd, d);
  for (int64_t i = 0; i < n; ++i) {
    math::OutputGrad(pr.titans, sc.y.data() + i * d, K + i * ld, V + i * ld, ln_w, ln_b, pr.eps, d,
                     sc.dy.data() + i * d);
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, e, d, 1.0f, sc.dy.data(), d, W1, e, 0.0f, sc.dz.data(),
              e);
  for (int64_t i = 0; i < n * e; ++i) sc.dz[i] *= math::GeluGrad(sc.z[i]);
}

// Token t (head hd): updates W (and S) with the gradient in scratch row i, then writes
// out = q + N(W1·GELU(W2·q)) with the updated weights. Each weight row is updated and read in one pass.
void ScanToken(const Problem& pr, float* W, float* S, int64_t t, int64_t hd, int64_t i, Scratch& sc) {
  const int d = pr.d, e = pr.e;
  const int64_t row = t * pr.heads + hd;
  const float* q = pr.q + row * d;
  const float* k = pr.k + row * d;
  const float eta = pr.step[row];
  const float alpha = pr.titans ? pr.alpha[row] : 1.0f, beta = pr.titans ? pr.beta[row] : 0.0f;
  const float *dz = sc.dz.data() + i * e, *h = sc.h.data() + i * e, *dy = sc.dy.data() + i * d;
  float* W1 = W + static_cast<int64_t>(e) * d;
  float* S1 = S != nullptr ? S + static_cast<int64_t>(e) * d : nullptr;
  for (int r = 0; r < e; ++r) {
    const int64_t o = static_cast<int64_t>(r) * d;
    const float zq = pr.titans ? math::TitansRowUpdateDot(W + o, S + o, alpha, beta, eta, dz[r], k, q, d)
                               : math::DlaRowUpdateDot(W + o, eta, dz[r], k, q, d);
    sc.hq[r] = math::Gelu(zq);
  }
  for (int j = 0; j < d; ++j) {
    const int64_t o = static_cast<int64_t>(j) * e;
    sc.yq[j] = pr.titans ? math::TitansRowUpdateDot(W1 + o, S1 + o, alpha, beta, eta, dy[j], h, sc.hq.data(), e)
                         : math::DlaRowUpdateDot(W1 + o, eta, dy[j], h, sc.hq.data(), e);
  }
  math::FinishOutput(q, sc.yq.data(), LnRow(pr.ln_w, hd, d), LnRow(pr.ln_b, hd, d), pr.eps, d, pr.out + row * d);
}

// Sequence b, head hd: every token of the sequence in order.
void RunTask(const Problem& pr, int64_t b, int64_t hd, Scratch& sc) {
  const int64_t sh = static_cast<int64_t>(pr.slots[b]) * pr.heads + hd;
  float* W = pr.memory + sh * pr.p;
  float* S = pr.momentum != nullptr ? pr.momentum + sh * pr.p : nullptr;
  const int64_t begin = pr.cu[b], n = pr.cu[b + 1] - begin;
  if (pr.chunk == 1) {
    for (int64_t i = 0; i < n; ++i) {
      GradientLoop(pr, W, begin + i, hd, 0, sc);
      ScanToken(pr, W, S, begin + i, hd, 0, sc);
    }
    return;
  }
  float* A = pr.anchor + sh * pr.p;
  const int64_t off = pr.offsets[b];
  for (int64_t i = 0; i < n;) {
    const int64_t pos = (off + i) % pr.chunk, len = std::min<int64_t>(pr.chunk - pos, n - i);
    if (pos == 0) std::memcpy(A, W, static_cast<size_t>(pr.p) * sizeof(float));
    if (len >= kMinGemmRows) {
      GradientGemm(pr, A, begin + i, len, hd, sc);
    } else {
      for (int64_t j = 0; j < len; ++j) GradientLoop(pr, A, begin + i + j, hd, j, sc);
    }
    for (int64_t j = 0; j < len; ++j) ScanToken(pr, W, S, begin + i + j, hd, j, sc);
    i += len;
  }
}

const float* OptData(const Tensor* t) { return t != nullptr ? Data<float>(*t) : nullptr; }

}  // namespace

absl::Status DeepMemoryCpu(const Context& ctx, const DeepMemoryArgs& args) {
  const int64_t num_seqs = args.layout.slot_ids->dim(0), heads = args.q->dim(1), d = args.q->dim(2);
  if (num_seqs == 0 || heads == 0 || args.q->dim(0) == 0) return absl::OkStatus();
  Problem pr{};
  pr.titans = args.rule == DeepMemoryRule::kTitans;
  pr.d = static_cast<int>(d);
  pr.e = static_cast<int>(args.expansion * d);
  pr.chunk = args.inner_chunk_size;
  pr.eps = args.ln_eps;
  pr.heads = heads;
  pr.p = args.memory->dim(2);
  pr.q = Data<float>(*args.q);
  pr.k = Data<float>(*args.k);
  pr.v = Data<float>(*args.v);
  pr.step = Data<float>(*args.step);
  pr.alpha = OptData(args.retention);
  pr.beta = OptData(args.momentum_gate);
  pr.ln_w = OptData(args.ln_weight);
  pr.ln_b = OptData(args.ln_bias);
  pr.cu = Data<int32_t>(*args.layout.cu_seqlens);
  pr.slots = Data<int32_t>(*args.layout.slot_ids);
  pr.offsets = pr.chunk > 1 ? Data<int32_t>(*args.inner_offset) : nullptr;
  pr.memory = Data<float>(*args.memory);
  pr.momentum = args.momentum != nullptr ? Data<float>(*args.momentum) : nullptr;
  pr.anchor = args.anchor != nullptr ? Data<float>(*args.anchor) : nullptr;
  pr.out = Data<float>(*args.out);
  if (d == 0) return absl::OkStatus();
  cpu::ParallelFor(ctx.pool, num_seqs * heads, [&](int64_t begin, int64_t end) {
    Scratch sc(pr.chunk, pr.d, pr.e);
    for (int64_t task = begin; task < end; ++task) RunTask(pr, task / heads, task % heads, sc);
  });
  return absl::OkStatus();
}

absl::Status DeepMemoryAccumulateCpu(const Context& ctx, const DeepMemoryAccumulateArgs& args) {
  const int64_t n = args.slot_ids->dim(0), per_slot = args.memory->dim(1) * args.memory->dim(2);
  if (n == 0 || per_slot == 0) return absl::OkStatus();
  const int32_t* ids = Data<int32_t>(*args.slot_ids);
  const float* src = Data<float>(*args.memory);
  float* dst = Data<float>(*args.sum);
  constexpr int64_t kBlock = 1 << 14;  // floats per task
  const int64_t blocks = (per_slot + kBlock - 1) / kBlock;
  cpu::ParallelFor(n * blocks > 1 ? ctx.pool : nullptr, n * blocks, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t base = static_cast<int64_t>(ids[task / blocks]) * per_slot;
      const int64_t i0 = (task % blocks) * kBlock, i1 = std::min(per_slot, i0 + kBlock);
      for (int64_t i = i0; i < i1; ++i) dst[base + i] += src[base + i];
    }
  });
  return absl::OkStatus();
}

}  // namespace mcserve::kernels::internal
