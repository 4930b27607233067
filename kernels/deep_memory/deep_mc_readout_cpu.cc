// CPU DeepMcReadout. Work is split into fixed tasks of (head, block of kTokenBlock tokens), so the
// result never depends on the thread count. A task first computes its tokens' gate weights (the
// McReadout math: same scores, ties and softmax; the scores by ScorePages, rounded as the CPU router
// and McReadout round them), then walks the pages; the tokens of the block that read a page (found
// through a page → entries inverse of the CSR lists) are batched, and the page's MLP runs over them
// as two sgemms (Z = c·Q·W2ᵀ, Y = c·σ(Z)·W1ᵀ); a page read by at most kLoopMaxRows tokens of the
// block (decode) runs as GEMV loops instead.
//   kSum / kSoftmax / kTopKSoftmax: y = γ_on·o_on, then y += γ_i·(q + N(Y_i)) per page.
//   kSoup: two passes over the pages — z* = γ_on·W2_on·q + Σ γ_i·Z_i, h* = σ(z*), then
//   y* = γ_on·W1_on·h* + Σ γ_i·c_i·W1_i·h* (sgemm over the gathered h* rows), y = q + N(y*).
#include <cblas.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/core/tensor_data.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/mc_readout/token_page_index.h"
#include "kernels/deep_memory/deep_mc_readout.h"
#include "kernels/deep_memory/deep_memory_math.h"
#include "kernels/mc_readout/mc_readout_math.h"
#include "kernels/mc_readout/score_pages.h"

namespace mcserve::kernels::internal {
namespace {

namespace math = deep_memory_math;

constexpr int64_t kTokenBlock = 32;            // tokens per task
constexpr int64_t kLoopMaxRows = 2;            // up to this many readers of a page: loops, not sgemm
constexpr int64_t kMinParallelMacs = 1 << 15;  // below this the pool costs more than it saves

// Everything a task reads, resolved once.
struct Problem {
  DeepMcCombine combine;
  bool silu;  // σ = SiLU, else GELU
  int top_k;
  float online_weight, cached_weight, eps;
  int64_t t, hs, e_entries;
  int d, e;
  int64_t p;  // weights per head
  const float *q, *u, *online_pool, *online, *ln_w, *ln_b;
  const float* online_memory;  // kSoup: [num_slots, H, P]
  std::vector<int32_t> token_slot;  // kSoup: [T] slot of the token's sequence
  float* out;
  const int32_t *offsets, *token_pages;
  std::vector<const float*> memory, pooled;  // per page: [H, P], [H, d] (null for kSum)
  std::vector<float> scale;                  // per page: weight_scale
  TokenPageIndex index;  // the readers of each page, by token
  std::vector<float> gamma;     // [H, E]: weight of entry x for head h at h·E + x (0 = not read)
  std::vector<unsigned char> keep;  // [Hs, entries]: top-k scratch of each (head, entry), as gamma
  std::vector<float> gamma_on;  // [H, T]: the online memory's weight
};

const float* LnRow(const float* ln, int64_t h, int d) { return ln != nullptr ? ln + h * d : nullptr; }

// Gate weights of tokens [t0, t1) for head h into pr.gamma and pr.gamma_on.
void GateWeights(Problem& pr, int64_t h, int64_t t0, int64_t t1) {
  float* gamma = pr.gamma.data() + h * pr.e_entries;
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t row = t * pr.hs + h;
    const int32_t x0 = pr.offsets[t], n = pr.offsets[t + 1] - x0;
    float g_on;
    if (pr.combine == DeepMcCombine::kSum) {
      std::fill(gamma + x0, gamma + x0 + n, pr.cached_weight);
      g_on = pr.online_weight;
    } else {
      const float* u = pr.u + row * pr.d;
      // Rounded as McRoute's CPU router rounds them (ScorePages, no fused products), so that a list
      // reduced to the router's selection keeps the same pages.
      ScorePages(u, pr.pooled.data(), pr.token_pages + x0, n, h * pr.d, pr.d, gamma + x0);
      const float z_on = math::Dot(u, pr.online_pool + row * pr.d, pr.d);
      const int top_k = pr.combine == DeepMcCombine::kTopKSoftmax ? pr.top_k : 0;
      g_on = mc_readout_math::GateWeights(gamma + x0, n, z_on, top_k, pr.keep.data() + h * pr.e_entries + x0);
    }
    pr.gamma_on[h * pr.t + t] = g_on;
  }
}

// The entries s (into index.entry, index.token) of page i read by tokens [t0, t1) with a nonzero weight for head h.
void PageRows(const Problem& pr, int64_t i, int64_t h, int64_t t0, int64_t t1, std::vector<int32_t>& rows) {
  const float* gamma = pr.gamma.data() + h * pr.e_entries;
  const int32_t* tok_begin = pr.index.token.data() + pr.index.page_begin[i];
  const int32_t* tok_end = pr.index.token.data() + pr.index.page_begin[i + 1];
  const int64_t lo = std::lower_bound(tok_begin, tok_end, static_cast<int32_t>(t0)) - pr.index.token.data();
  const int64_t hi = std::lower_bound(tok_begin, tok_end, static_cast<int32_t>(t1)) - pr.index.token.data();
  rows.clear();
  for (int64_t s = lo; s < hi; ++s) {
    if (gamma[pr.index.entry[s]] != 0.0f) rows.push_back(static_cast<int32_t>(s));
  }
}

// Y [m, n_out] = c·X [m, n_in] · Wᵀ for W row-major [n_out, n_in].
void GemmT(const float* x, int64_t m, int n_in, const float* w, int n_out, float c, float* y) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), n_out, n_in, c, x, n_in, w, n_in, 0.0f, y,
              n_out);
}

// kSum / kSoftmax / kTopKSoftmax for head h, tokens [t0, t1).
void MixOutputs(const Problem& pr, int64_t h, int64_t t0, int64_t t1) {
  const int d = pr.d, e = pr.e;
  const float* gamma = pr.gamma.data() + h * pr.e_entries;
  const float *ln_w = LnRow(pr.ln_w, h, d), *ln_b = LnRow(pr.ln_b, h, d);
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t row = t * pr.hs + h;
    mc_readout_math::ScaleOnline(pr.online + row * d, pr.gamma_on[h * pr.t + t], d, pr.out + row * d);
  }
  thread_local std::vector<int32_t> rows;
  thread_local std::vector<float> x, z, y, tmp;
  tmp.resize(d);
  for (int64_t i = 0; i < static_cast<int64_t>(pr.memory.size()); ++i) {
    PageRows(pr, i, h, t0, t1, rows);
    if (rows.empty()) continue;
    const float* W = pr.memory[i] + h * pr.p;
    const float c = pr.scale[i];
    const int64_t m = static_cast<int64_t>(rows.size());
    z.resize(m * e);
    y.resize(m * d);
    if (m <= kLoopMaxRows) {
      for (int64_t r = 0; r < m; ++r) {
        const float* q = pr.q + (pr.index.token[rows[r]] * pr.hs + h) * d;
        math::MlpForward(W, q, c, d, e, z.data() + r * e, y.data() + r * d, pr.silu);
      }
    } else {
      x.resize(m * d);
      for (int64_t r = 0; r < m; ++r) {
        std::copy_n(pr.q + (pr.index.token[rows[r]] * pr.hs + h) * d, d, x.data() + r * d);
      }
      GemmT(x.data(), m, d, W, e, c, z.data());
      for (int64_t j = 0; j < m * e; ++j) z[j] = math::Activate(pr.silu, z[j]);
      GemmT(z.data(), m, e, W + static_cast<int64_t>(e) * d, d, c, y.data());
    }
    for (int64_t r = 0; r < m; ++r) {
      const int64_t row = pr.index.token[rows[r]] * pr.hs + h;
      math::AccumulateOutput(pr.q + row * d, y.data() + r * d, ln_w, ln_b, pr.eps, d, gamma[pr.index.entry[rows[r]]],
                             tmp.data(), pr.out + row * d);
    }
  }
}

// acc [n_out] += w·(c·W [n_out, n_in] · x [n_in]).
void AddGemv(const float* W, const float* x, int n_out, int n_in, float wc, float* acc) {
  for (int r = 0; r < n_out; ++r) acc[r] += wc * math::Dot(W + static_cast<int64_t>(r) * n_in, x, n_in);
}

// kSoup for head h, tokens [t0, t1): activation mixing, layer by layer.
void Soup(const Problem& pr, int64_t h, int64_t t0, int64_t t1) {
  const int d = pr.d, e = pr.e;
  const int64_t nb = t1 - t0, e_d = static_cast<int64_t>(e) * d;
  const float* gamma = pr.gamma.data() + h * pr.e_entries;
  thread_local std::vector<int32_t> rows;
  thread_local std::vector<float> zs, ys, x, tmp;
  zs.assign(nb * e, 0.0f);  // z*, then h*
  ys.assign(nb * d, 0.0f);  // y*
  const auto online_w = [&](int64_t t) { return pr.online_memory + (pr.token_slot[t] * pr.hs + h) * pr.p; };
  for (int64_t t = t0; t < t1; ++t) {
    AddGemv(online_w(t), pr.q + (t * pr.hs + h) * d, e, d, pr.gamma_on[h * pr.t + t], zs.data() + (t - t0) * e);
  }
  for (int pass = 0; pass < 2; ++pass) {
    const int n_in = pass == 0 ? d : e, n_out = pass == 0 ? e : d;
    float* acc = pass == 0 ? zs.data() : ys.data();
    for (int64_t i = 0; i < static_cast<int64_t>(pr.memory.size()); ++i) {
      PageRows(pr, i, h, t0, t1, rows);
      if (rows.empty()) continue;
      const float* W = pr.memory[i] + h * pr.p + (pass == 0 ? 0 : e_d);
      const float c = pr.scale[i];
      const int64_t m = static_cast<int64_t>(rows.size());
      // The layer's input of entry s: q (pass 0) or h* of its token (pass 1).
      const auto input = [&](int32_t s) {
        const int64_t t = pr.index.token[s];
        return pass == 0 ? pr.q + (t * pr.hs + h) * d : zs.data() + (t - t0) * e;
      };
      if (m <= kLoopMaxRows) {
        for (int32_t s : rows) {
          AddGemv(W, input(s), n_out, n_in, gamma[pr.index.entry[s]] * c, acc + (pr.index.token[s] - t0) * n_out);
        }
        continue;
      }
      x.resize(m * n_in);
      tmp.resize(m * n_out);
      for (int64_t r = 0; r < m; ++r) std::copy_n(input(rows[r]), n_in, x.data() + r * n_in);
      GemmT(x.data(), m, n_in, W, n_out, c, tmp.data());
      for (int64_t r = 0; r < m; ++r) {
        const float g = gamma[pr.index.entry[rows[r]]];
        float* a = acc + (pr.index.token[rows[r]] - t0) * n_out;
        const float* yr = tmp.data() + r * n_out;
        for (int j = 0; j < n_out; ++j) a[j] += g * yr[j];
      }
    }
    if (pass == 0) {
      for (int64_t j = 0; j < nb * e; ++j) zs[j] = math::Activate(pr.silu, zs[j]);
      for (int64_t t = t0; t < t1; ++t) {
        AddGemv(online_w(t) + e_d, zs.data() + (t - t0) * e, d, e, pr.gamma_on[h * pr.t + t], ys.data() + (t - t0) * d);
      }
    }
  }
  const float *ln_w = LnRow(pr.ln_w, h, d), *ln_b = LnRow(pr.ln_b, h, d);
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t row = t * pr.hs + h;
    if (pr.online != nullptr && pr.offsets[t + 1] == pr.offsets[t]) {  // no page: o_on exactly
      std::copy_n(pr.online + row * d, d, pr.out + row * d);
      continue;
    }
    math::FinishOutput(pr.q + row * d, ys.data() + (t - t0) * d, ln_w, ln_b, pr.eps, d, pr.out + row * d);
  }
}

}  // namespace

absl::Status DeepMcReadoutCpu(const Context& ctx, const DeepMcReadoutArgs& args) {
  // The calling thread's, reused so that its vectors keep their capacity (a decode step allocates
  // nothing); a reference, so that the loop's threads read this one and not their own.
  thread_local Problem storage;
  Problem& pr = storage;
  pr.memory.clear();
  pr.pooled.clear();
  pr.scale.clear();
  pr.combine = args.combine;
  pr.silu = args.activation == DeepMcActivation::kSilu;
  pr.top_k = args.top_k;
  pr.online_weight = args.online_weight;
  pr.cached_weight = args.cached_weight;
  pr.eps = args.ln_eps;
  pr.t = args.q->dim(0);
  pr.hs = args.q->dim(1);
  pr.d = static_cast<int>(args.q->dim(2));
  pr.e = static_cast<int>(args.expansion * args.q->dim(2));
  pr.p = 2 * static_cast<int64_t>(pr.e) * pr.d;
  pr.e_entries = args.token_pages->dim(0);
  if (pr.t == 0 || pr.hs == 0 || pr.d == 0) return absl::OkStatus();
  const bool gated = args.combine != DeepMcCombine::kSum;
  const bool soup = args.combine == DeepMcCombine::kSoup;
  const auto opt = [](const Tensor* t) { return t != nullptr ? Data<float>(*t) : nullptr; };
  pr.q = Data<float>(*args.q);
  pr.u = gated ? opt(args.u) : nullptr;
  pr.online_pool = gated ? opt(args.online_pool) : nullptr;
  pr.online = opt(args.online);
  pr.ln_w = opt(args.ln_weight);
  pr.ln_b = opt(args.ln_bias);
  pr.online_memory = opt(args.online_memory);
  pr.out = Data<float>(*args.out);
  pr.offsets = Data<int32_t>(*args.token_page_offsets);
  pr.token_pages = Data<int32_t>(*args.token_pages);
  for (const DeepMcPage& page : args.pages) {
    pr.memory.push_back(Data<float>(*page.memory));
    pr.pooled.push_back(gated ? Data<float>(*page.pooled_key) : nullptr);
    pr.scale.push_back(page.weight_scale);
  }
  if (soup) {
    const int32_t* cu = Data<int32_t>(*args.layout.cu_seqlens);
    const int32_t* slots = Data<int32_t>(*args.layout.slot_ids);
    pr.token_slot.resize(pr.t);
    for (int64_t b = 0; b < args.layout.slot_ids->dim(0); ++b) {
      std::fill(pr.token_slot.begin() + cu[b], pr.token_slot.begin() + cu[b + 1], slots[b]);
    }
  }
  BuildTokenPageIndex(pr.offsets, pr.t, pr.token_pages, pr.e_entries, static_cast<int64_t>(pr.memory.size()), pr.index);
  pr.gamma.assign(pr.hs * pr.e_entries, 0.0f);
  pr.keep.resize(pr.gamma.size());  // on the calling thread: the loop's threads allocate nothing
  pr.gamma_on.assign(pr.hs * pr.t, 0.0f);

  const int64_t blocks = (pr.t + kTokenBlock - 1) / kTokenBlock;
  const int64_t macs = pr.hs * (pr.e_entries + (soup ? pr.t : 0)) * pr.p;
  cpu::ThreadPool* pool = macs >= kMinParallelMacs ? ctx.pool : nullptr;
  cpu::ParallelFor(pool, pr.hs * blocks, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t h = task / blocks, t0 = (task % blocks) * kTokenBlock;
      const int64_t t1 = std::min(pr.t, t0 + kTokenBlock);
      GateWeights(pr, h, t0, t1);
      if (soup) {
        Soup(pr, h, t0, t1);
      } else {
        MixOutputs(pr, h, t0, t1);
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace mcserve::kernels::internal
