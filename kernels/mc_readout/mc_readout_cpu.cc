// CPU McReadout. The softmax combines first score every entry of the lists for every head, page by
// page (tasks of kScoreChunk entries: each page's pooled keys read once, front to back). Then work is
// split into fixed tasks of (state head, block of kTokenBlock tokens), so the result never depends on
// the thread count. A task first computes its tokens' gate weights and
// writes y = γ_on·o_on, then walks the pages: the tokens of the block that read a page (found through
// a page → entries inverse of the CSR lists) are batched into one sgemm Y = (γ q)·S_page,head and
// added to their rows of y; pages read by at most kLoopMaxRows tokens of the block (decode) use the
// AccumulateReadOut loop (accumulate_readout.h) instead. When no page has more than kLoopMaxRows
// entries and every token lists its pages in ascending order (decode: each sequence reads its own
// pages, listed in order), a task walks its tokens' kept entries instead (TokenReadouts): the same
// terms added in the same order, without a pass over every page per head. Nothing of size K×V is
// built per token.
#include <cblas.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/core/tensor_data.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/mc_readout/accumulate_readout.h"
#include "kernels/mc_readout/mc_readout.h"
#include "kernels/mc_readout/mc_readout_math.h"
#include "kernels/mc_readout/score_pages.h"
#include "kernels/mc_readout/token_page_index.h"

namespace mcserve::kernels::internal {
namespace {

namespace math = mc_readout_math;

constexpr int64_t kTokenBlock = 64;            // tokens per task
constexpr int64_t kScoreChunk = 64;            // entries per scoring task
constexpr int64_t kLoopMaxRows = 2;            // up to this many readers of a page: loop, not sgemm
constexpr int64_t kMinParallelMacs = 1 << 15;  // below this the pool costs more than it saves

// Everything a task reads, resolved once.
struct Problem {
  McCombine combine;
  int top_k;
  float online_weight, cached_weight;
  int64_t t, hs, k, v, p;
  const float *q, *u, *online_pool, *online;
  float* out;
  const int32_t *offsets, *token_pages;
  std::vector<const float*> memory, pooled;  // per page: [Hs, K, V], [Hs, K] (null for kSum)
  bool token_major = false;                  // TokenReadouts, not PageReadouts (TokenMajor)
  TokenPageIndex index;                      // the readers of each page, by token (built only for PageReadouts)
  std::vector<int32_t> readers;              // [pages]: TokenMajor's count of entries per page
  std::vector<float> gamma;                  // [Hs, P]: weight of entry e for head h at h·P + e (0 = not read)
  std::vector<unsigned char> keep;           // [Hs, entries]: top-k scratch of each (head, entry), as gamma
};

// gamma[h·P + e] = ⟨u_t,h, pooled key h of entry e's page⟩ for entries [e0, e1) (token t reads entry
// e), every head of a page at once (ScorePageHeads).
void ScoreEntries(Problem& pr, int64_t e0, int64_t e1) {
  int64_t t = std::upper_bound(pr.offsets, pr.offsets + pr.t + 1, static_cast<int32_t>(e0)) - pr.offsets - 1;
  for (; t < pr.t && pr.offsets[t] < e1; ++t) {
    const int64_t begin = std::max<int64_t>(e0, pr.offsets[t]), end = std::min<int64_t>(e1, pr.offsets[t + 1]);
    if (begin >= end) continue;
    ScorePageHeads(pr.u + t * pr.hs * pr.k, pr.pooled.data(), pr.token_pages + begin, static_cast<int32_t>(end - begin),
                   pr.hs, static_cast<int>(pr.k), pr.gamma.data() + begin, pr.p);
  }
}

// Gate weights of tokens [t0, t1) for head h into pr.gamma (from their scores there, for the softmax
// combines), and y = γ_on·o_on.
void WeightsAndOnline(Problem& pr, int64_t h, int64_t t0, int64_t t1) {
  const int k = static_cast<int>(pr.k), v = static_cast<int>(pr.v);
  float* gamma = pr.gamma.data() + h * pr.p;
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t row = t * pr.hs + h;
    const int32_t e0 = pr.offsets[t], n = pr.offsets[t + 1] - e0;
    float g_on;
    if (pr.combine == McCombine::kSum) {
      std::fill(gamma + e0, gamma + e0 + n, pr.cached_weight);
      g_on = pr.online_weight;
    } else {
      const float* u = pr.u + row * pr.k;  // gamma holds the entries' scores (ScoreEntries)
      const float z_on = math::Dot(u, pr.online_pool + row * pr.k, k);
      const int top_k = pr.combine == McCombine::kTopKSoftmax ? pr.top_k : 0;
      g_on = math::GateWeights(gamma + e0, n, z_on, top_k, pr.keep.data() + h * pr.p + e0);
    }
    math::ScaleOnline(pr.online + row * pr.v, g_on, v, pr.out + row * pr.v);
  }
}

// True when every page has at most kLoopMaxRows entries and every token's entries list pages in
// ascending order. Then PageReadouts would take the loop for every page and add a token's terms
// page by page, entry by entry: the order TokenReadouts walks the token's entries in.
bool TokenMajor(Problem& pr) {
  const int64_t num_pages = static_cast<int64_t>(pr.memory.size());
  pr.readers.assign(num_pages, 0);
  for (int64_t t = 0; t < pr.t; ++t) {
    for (int32_t x = pr.offsets[t]; x < pr.offsets[t + 1]; ++x) {
      const int32_t page = pr.token_pages[x];
      if (++pr.readers[page] > kLoopMaxRows) return false;
      if (x > pr.offsets[t] && page < pr.token_pages[x - 1]) return false;
    }
  }
  return true;
}

// y += Σ over the kept entries of tokens [t0, t1), head h, in list order (TokenMajor holds).
void TokenReadouts(const Problem& pr, int64_t h, int64_t t0, int64_t t1) {
  const int64_t k = pr.k, v = pr.v;
  const float* gamma = pr.gamma.data() + h * pr.p;
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t row = t * pr.hs + h;
    for (int32_t x = pr.offsets[t]; x < pr.offsets[t + 1]; ++x) {
      if (gamma[x] == 0.0f) continue;
      AccumulateReadOut(pr.memory[pr.token_pages[x]] + h * k * v, pr.q + row * k, gamma[x], static_cast<int>(k),
                        static_cast<int>(v), pr.out + row * v);
    }
  }
}

// y += Σ over pages of the block's weighted read-outs, head h, tokens [t0, t1).
void PageReadouts(const Problem& pr, int64_t h, int64_t t0, int64_t t1) {
  const int64_t k = pr.k, v = pr.v, num_pages = static_cast<int64_t>(pr.memory.size());
  const float* gamma = pr.gamma.data() + h * pr.p;
  thread_local std::vector<int32_t> rows;  // entries of the current page with a nonzero weight
  thread_local std::vector<float> x, y;    // [rows, K] scaled queries, [rows, V] read-outs
  for (int64_t i = 0; i < num_pages; ++i) {
    const int32_t* tok_begin = pr.index.token.data() + pr.index.page_begin[i];
    const int32_t* tok_end = pr.index.token.data() + pr.index.page_begin[i + 1];
    const int64_t lo = std::lower_bound(tok_begin, tok_end, static_cast<int32_t>(t0)) - pr.index.token.data();
    const int64_t hi = std::lower_bound(tok_begin, tok_end, static_cast<int32_t>(t1)) - pr.index.token.data();
    rows.clear();
    for (int64_t s = lo; s < hi; ++s) {
      if (gamma[pr.index.entry[s]] != 0.0f) rows.push_back(static_cast<int32_t>(s));
    }
    if (rows.empty()) continue;
    const float* S = pr.memory[i] + h * k * v;
    const int64_t m = static_cast<int64_t>(rows.size());
    if (m <= kLoopMaxRows || k == 0 || v == 0) {
      for (int32_t s : rows) {
        const int64_t row = pr.index.token[s] * pr.hs + h;
        AccumulateReadOut(S, pr.q + row * k, gamma[pr.index.entry[s]], static_cast<int>(k), static_cast<int>(v),
                          pr.out + row * v);
      }
      continue;
    }
    x.resize(m * k);
    y.resize(m * v);
    for (int64_t r = 0; r < m; ++r) {
      const int32_t s = rows[r];
      const float g = gamma[pr.index.entry[s]];
      const float* q = pr.q + (pr.index.token[s] * pr.hs + h) * k;
      for (int64_t c = 0; c < k; ++c) x[r * k + c] = g * q[c];
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m), static_cast<int>(v),
                static_cast<int>(k), 1.0f, x.data(), static_cast<int>(k), S, static_cast<int>(v), 0.0f, y.data(),
                static_cast<int>(v));
    for (int64_t r = 0; r < m; ++r) {
      float* out = pr.out + (pr.index.token[rows[r]] * pr.hs + h) * v;
      const float* yr = y.data() + r * v;
      for (int64_t c = 0; c < v; ++c) out[c] += yr[c];
    }
  }
}

}  // namespace

absl::Status McReadoutCpu(const Context& ctx, const McReadoutArgs& args) {
  // The calling thread's, reused so that its vectors keep their capacity (a decode step allocates
  // nothing); a reference, so that the loop's threads read this one and not their own.
  thread_local Problem storage;
  Problem& pr = storage;
  pr.memory.clear();
  pr.pooled.clear();
  pr.combine = args.combine;
  pr.top_k = args.top_k;
  pr.online_weight = args.online_weight;
  pr.cached_weight = args.cached_weight;
  pr.t = args.q->dim(0);
  pr.hs = args.q->dim(1);
  pr.k = args.q->dim(2);
  pr.v = args.online->dim(2);
  pr.p = args.token_pages->dim(0);
  if (pr.t == 0 || pr.hs == 0 || pr.v == 0) return absl::OkStatus();
  const bool softmax = args.combine != McCombine::kSum;
  pr.q = Data<float>(*args.q);
  pr.u = softmax ? Data<float>(*args.u) : nullptr;
  pr.online_pool = softmax ? Data<float>(*args.online_pool) : nullptr;
  pr.online = Data<float>(*args.online);
  pr.out = Data<float>(*args.out);
  pr.offsets = Data<int32_t>(*args.token_page_offsets);
  pr.token_pages = Data<int32_t>(*args.token_pages);
  for (const McPage& page : args.pages) {
    pr.memory.push_back(Data<float>(*page.memory));
    pr.pooled.push_back(softmax ? Data<float>(*page.pooled_key) : nullptr);
  }
  pr.token_major = TokenMajor(pr);
  if (!pr.token_major) {
    BuildTokenPageIndex(pr.offsets, pr.t, pr.token_pages, pr.p, static_cast<int64_t>(pr.memory.size()), pr.index);
  }
  pr.gamma.assign(pr.hs * pr.p, 0.0f);
  pr.keep.resize(pr.gamma.size());  // on the calling thread: the loop's threads allocate nothing

  const int64_t blocks = (pr.t + kTokenBlock - 1) / kTokenBlock;
  const int64_t macs = pr.hs * (pr.p * pr.k * pr.v + pr.t * pr.v);
  cpu::ThreadPool* pool = macs >= kMinParallelMacs ? ctx.pool : nullptr;
  if (softmax) {
    // Scored first, entry by entry, so that each page's keys are read once for all heads.
    const int64_t chunks = (pr.p + kScoreChunk - 1) / kScoreChunk;
    cpu::ThreadPool* score_pool = pr.hs * pr.p * pr.k >= kMinParallelMacs ? ctx.pool : nullptr;
    cpu::ParallelFor(score_pool, chunks, [&](int64_t begin, int64_t end) {
      ScoreEntries(pr, begin * kScoreChunk, std::min(pr.p, end * kScoreChunk));
    });
  }
  cpu::ParallelFor(pool, pr.hs * blocks, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t h = task / blocks, t0 = (task % blocks) * kTokenBlock;
      const int64_t t1 = std::min(pr.t, t0 + kTokenBlock);
      WeightsAndOnline(pr, h, t0, t1);
      if (pr.token_major) {
        TokenReadouts(pr, h, t0, t1);
      } else {
        PageReadouts(pr, h, t0, t1);
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace mcserve::kernels::internal
