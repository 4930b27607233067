// HopeMemory's per-(sequence, head) scan, written once for both backends over a "team" of threads, and
// its two halves (HopeFeatures: the producers, convs, gates and fast-memory writes; HopeMemWrite: M_mem
// alone from given features), which run the same phases on the same arithmetic:
// the CPU runs it with a team of one (Sync a no-op), a CUDA block with its threads (Sync =
// __syncthreads). Every phase is a team-strided loop over independent elements computed by the
// functions of hope_memory_math.h, and the phases are separated by Sync, so both backends do the same
// arithmetic per element. The scratch is HopeScratchFloats(d, E) floats (CUDA: shared memory).
// Any thread (CPU) or block (CUDA); tasks of one call touch disjoint (slot, head) state, so they run
// concurrently as long as no two sequences of a call share a slot (ValidateBatchLayout's rule).
#pragma once

#include <cstdint>

#include "kernels/hope_memory/hope_memory.h"
#include "kernels/hope_memory/hope_memory_math.h"

#if defined(__CUDACC__)
#define MCSERVE_TEAM_FN __device__ inline
#else
#define MCSERVE_TEAM_FN inline
#endif

namespace mcserve::kernels::hope_memory_math {

// The raw pointers and sizes of one call (validated by hope_memory.cc). Shapes as in HopeMemoryArgs;
// beta, skip, momentum, fast_momentum and conv_* may be null where the options leave them out.
struct HopeScanParams {
  HopeMemoryOptions opt;
  int d, e, conv;                         // head_dim, E, K
  int64_t t, heads, num_slots, pm, pf;    // rows, H, slots, floats per head of memory / fast
  const float *x, *q_pre, *beta, *skip;   // [T, H, d], [T, H, d], [T, H], [2, H, d]
  const float *q_conv, *k_conv, *v_conv;  // [H·d, 1, K]
  const int32_t *cu, *slots, *phase;      // [B + 1], [B], [B]
  float *memory, *mem_anchor, *momentum;  // [num_slots, H, Pm]
  float *fast, *fast_anchor, *fast_momentum;  // [num_slots, H, Pf]
  float *conv_q, *conv_k, *conv_v;        // [num_slots, K − 1, H·d]
  float* out;                             // [T, H, d] (null for HopeFeatures)
  // HopeFeatures (memory null): the features it writes; q, k, v [T, H, d], alpha, eta [T, H].
  float *q_out, *k_out, *v_out, *alpha_out, *eta_out;
  // HopeMemWrite (fast null): the features it reads, shapes as above.
  const float *q_in, *k_in, *v_in, *alpha_in, *eta_in;
  float* read_weights;                    // HopeMemWrite: optional [num_slots, H, Pm], the weights read
};

// The CPU's team: one thread.
struct SoloTeam {
  int tid = 0, size = 1;
  void Sync() const {}
};

// Floats of scratch per task: x, q, k, v, err, w1a [d]; five [E] vectors; 8 scalars.
MCSERVE_HD int64_t HopeScratchFloats(int d, int e) { return 6 * static_cast<int64_t>(d) + 5 * e + 8; }

// The scratch carved into named vectors.
struct HopeScratch {
  float *x, *q, *k, *v, *err, *w1a;  // [d]
  float* h[5];                        // [E]: producers' hiddens, then a, sp, hv, w2k, b of a write
  float* s;                           // [8] scalars, indices below
};
enum HopeScalar { kEtaPre = 0, kAlphaPre, kAlpha, kEta, kBeta, kQNorm, kKNorm, kRn };

MCSERVE_HD HopeScratch CarveScratch(float* base, int d, int e) {
  HopeScratch s;
  s.x = base;
  s.q = s.x + d;
  s.k = s.q + d;
  s.v = s.k + d;
  s.err = s.v + d;
  s.w1a = s.err + d;
  s.h[0] = s.w1a + d;
  for (int i = 1; i < 5; ++i) s.h[i] = s.h[i - 1] + e;
  s.s = s.h[4] + e;
  return s;
}

// The memories of one (slot, head) the call runs: 0 k, 1 v, 2 eta, 3 alpha, 4 q (adaptive_q) from "fast"
// (when p.fast is set), then mem (when p.memory is set).
struct HopeHead {
  HopeMlp mlp[6];
  int count;      // memories written
  int producers;  // 4 or 5 (fast memories), 0 for HopeMemWrite
  bool has_mem;   // mlp[count − 1] is M_mem
  int64_t slot, head;
};

MCSERVE_HD HopeHead MakeHead(const HopeScanParams& p, int64_t slot, int64_t h) {
  HopeHead hd;
  hd.slot = slot;
  hd.head = h;
  hd.count = 0;
  hd.producers = 0;
  const int64_t ed = static_cast<int64_t>(p.e) * p.d, fo = (slot * p.heads + h) * p.pf, mo = (slot * p.heads + h) * p.pm;
  if (p.fast != nullptr) {
    const int64_t off[5] = {0, 2 * ed, 4 * ed, 5 * ed + p.e, 6 * ed + 2 * p.e};
    const int nf = p.opt.adaptive_q ? 5 : 4;
    for (int i = 0; i < nf; ++i) {
      const bool scalar = i == 2 || i == 3;
      hd.mlp[i] = {p.fast_anchor + fo + off[i], p.fast + fo + off[i],
                   p.fast_momentum != nullptr ? p.fast_momentum + fo + off[i] : nullptr,
                   scalar && p.skip != nullptr ? p.skip + ((i - 2) * p.heads + h) * p.d : nullptr, scalar ? 1 : p.d};
    }
    hd.count = hd.producers = nf;
  }
  hd.has_mem = p.memory != nullptr;
  if (hd.has_mem) {
    hd.mlp[hd.count++] = {p.mem_anchor + mo, p.memory + mo, p.momentum != nullptr ? p.momentum + mo : nullptr,
                          nullptr, p.d};
  }
  return hd;
}

// Step 1: anchors ← running weights at the chunk starts (pos = t − 1). Ends synced.
template <class Team>
MCSERVE_TEAM_FN void Refresh(const HopeScanParams& p, const HopeHead& hd, int64_t pos, const Team& team) {
  const int64_t fo = (hd.slot * p.heads + hd.head) * p.pf, mo = (hd.slot * p.heads + hd.head) * p.pm;
  if (p.fast != nullptr && pos % p.opt.chunk_size_other == 0) {
    for (int64_t i = team.tid; i < p.pf; i += team.size) p.fast_anchor[fo + i] = p.fast[fo + i];
  }
  if (p.memory != nullptr && pos % p.opt.chunk_size_mem == 0) {
    for (int64_t i = team.tid; i < p.pm; i += team.size) p.mem_anchor[mo + i] = p.memory[mo + i];
  }
  team.Sync();
}

// Step 2: k~, v~ (, q~) into s.k, s.v (, s.q), η~ and α~ into the scalars; q~ = q_pre otherwise.
template <class Team>
MCSERVE_TEAM_FN void Producers(const HopeScanParams& p, const HopeHead& hd, const HopeScratch& s, int64_t row,
                               const Team& team) {
  const int np = hd.producers, d = p.d, e = p.e;
  for (int64_t i = team.tid; i < static_cast<int64_t>(np) * e; i += team.size) {
    const int m = static_cast<int>(i / e), r = static_cast<int>(i % e);
    s.h[m][r] = Act(p.opt.activation, HiddenPre(hd.mlp[m].anchor, s.x, r, d));
  }
  team.Sync();
  const float* q_pre = p.q_pre != nullptr ? p.q_pre + (row * p.heads + hd.head) * d : nullptr;
  for (int c = team.tid; c < d + 2; c += team.size) {
    if (c == d || c == d + 1) {
      const int m = c == d ? 2 : 3;
      s.s[c == d ? kEtaPre : kAlphaPre] = OutputAt(hd.mlp[m].anchor, s.h[m], s.x, hd.mlp[m].skip, 0, 1, d, e);
      continue;
    }
    s.k[c] = OutputAt(hd.mlp[0].anchor, s.h[0], s.x, nullptr, c, d, d, e);
    s.v[c] = OutputAt(hd.mlp[1].anchor, s.h[1], s.x, nullptr, c, d, d, e);
    s.q[c] = q_pre != nullptr ? q_pre[c] : OutputAt(hd.mlp[4].anchor, s.h[4], s.x, nullptr, c, d, d, e);
  }
  team.Sync();
}

// Step 3–4: the convs, L2 of q and k, the gates. Ends synced.
template <class Team>
MCSERVE_TEAM_FN void Features(const HopeScanParams& p, const HopeHead& hd, const HopeScratch& s, int64_t row,
                              const Team& team) {
  const int d = p.d, k = p.conv;
  const int64_t hdim = p.heads * d, win = hd.slot * (k - 1) * hdim + hd.head * d;
  for (int c = team.tid; c < d; c += team.size) {
    const int64_t ch = hd.head * d + c;
    s.q[c] = ConvStep(p.q_conv + ch * k, k > 1 ? p.conv_q + win + c : nullptr, hdim, k, s.q[c]);
    s.k[c] = ConvStep(p.k_conv + ch * k, k > 1 ? p.conv_k + win + c : nullptr, hdim, k, s.k[c]);
    s.v[c] = ConvStep(p.v_conv + ch * k, k > 1 ? p.conv_v + win + c : nullptr, hdim, k, s.v[c]);
  }
  team.Sync();
  if (team.tid == 0) {
    s.s[kQNorm] = L2Norm(s.q, d);
    s.s[kKNorm] = L2Norm(s.k, d);
    const HopeGates g = Gates(p.opt, s.s[kEtaPre], s.s[kAlphaPre]);
    s.s[kAlpha] = g.alpha;
    s.s[kEta] = g.eta;
    s.s[kBeta] = p.opt.momentum == HopeMomentum::kData ? p.beta[row * p.heads + hd.head] : p.opt.momentum_beta;
  }
  team.Sync();
  for (int c = team.tid; c < d; c += team.size) {
    s.q[c] = s.q[c] / s.s[kQNorm];
    s.k[c] = s.k[c] / s.s[kKNorm];
  }
  team.Sync();
}

// HopeFeatures: the token's q, k, v and gates to the outputs. Ends synced.
template <class Team>
MCSERVE_TEAM_FN void StoreFeatures(const HopeScanParams& p, const HopeHead& hd, const HopeScratch& s, int64_t row,
                                   const Team& team) {
  const int64_t at = (row * p.heads + hd.head) * p.d;
  for (int c = team.tid; c < p.d; c += team.size) {
    p.q_out[at + c] = s.q[c];
    p.k_out[at + c] = s.k[c];
    p.v_out[at + c] = s.v[c];
  }
  if (team.tid == 0) {
    p.alpha_out[row * p.heads + hd.head] = s.s[kAlpha];
    p.eta_out[row * p.heads + hd.head] = s.s[kEta];
  }
  team.Sync();
}

// HopeMemWrite: the token's q, k, v and gates from the inputs (β from beta or momentum_beta). Ends synced.
template <class Team>
MCSERVE_TEAM_FN void LoadFeatures(const HopeScanParams& p, const HopeHead& hd, const HopeScratch& s, int64_t row,
                                  const Team& team) {
  const int64_t at = (row * p.heads + hd.head) * p.d;
  for (int c = team.tid; c < p.d; c += team.size) {
    s.q[c] = p.q_in[at + c];
    s.k[c] = p.k_in[at + c];
    s.v[c] = p.v_in[at + c];
  }
  if (team.tid == 0) {
    s.s[kAlpha] = p.alpha_in[row * p.heads + hd.head];
    s.s[kEta] = p.eta_in[row * p.heads + hd.head];
    s.s[kBeta] = p.opt.momentum == HopeMomentum::kData ? p.beta[row * p.heads + hd.head] : p.opt.momentum_beta;
  }
  team.Sync();
}

// Steps 5/7: out[row, head] = M_mem(q; W) for W the running or anchor weights (copied to read_weights
// when given). Ends synced.
template <class Team>
MCSERVE_TEAM_FN void Read(const HopeScanParams& p, const HopeHead& hd, const float* W, const HopeScratch& s,
                          int64_t row, const Team& team) {
  if (p.read_weights != nullptr) {
    float* copy = p.read_weights + (hd.slot * p.heads + hd.head) * p.pm;
    for (int64_t i = team.tid; i < p.pm; i += team.size) copy[i] = W[i];
  }
  for (int r = team.tid; r < p.e; r += team.size) s.h[0][r] = Act(p.opt.activation, HiddenPre(W, s.q, r, p.d));
  team.Sync();
  float* out = p.out + (row * p.heads + hd.head) * p.d;
  for (int c = team.tid; c < p.d; c += team.size) out[c] = OutputAt(W, s.h[0], s.q, nullptr, c, p.d, p.d, p.e);
  team.Sync();
}

// Step 6 for one memory: factors at its anchor, then its running weights (and momentum). Ends synced.
template <class Team>
MCSERVE_TEAM_FN void Write(const HopeScanParams& p, const HopeMlp& m, const HopeScratch& s, const Team& team) {
  const int d = p.d, e = p.e;
  float *a = s.h[0], *sp = s.h[1], *hv = s.h[2], *w2k = s.h[3], *b = s.h[4];
  for (int r = team.tid; r < e; r += team.size) WriteHidden(m, p.opt.activation, s.k, s.v, r, d, a, sp, hv, w2k);
  team.Sync();
  for (int j = team.tid; j < m.o; j += team.size) WriteError(m, s.k, s.v, a, hv, j, d, e, s.err, s.w1a);
  if (team.tid == 0) s.s[kRn] = p.opt.w1_rule == HopeW1Rule::kDgdHidden ? HatScale(a, e) : 0.0f;
  team.Sync();
  for (int r = team.tid; r < e; r += team.size) b[r] = Backprop(m, s.err, sp, p.opt.grad_scale, r, d, e);
  team.Sync();
  const HopeStep st{s.s[kAlpha], s.s[kEta], s.s[kBeta], p.opt.grad_scale, s.s[kRn],
                    p.opt.w1_rule == HopeW1Rule::kDgdHidden};
  const int64_t n2 = static_cast<int64_t>(e) * d, n1 = static_cast<int64_t>(m.o) * e;
  for (int64_t i = team.tid; i < n2; i += team.size) UpdateW2(m, st, w2k, b, s.k, i, d);
  for (int64_t i = team.tid; i < n1; i += team.size) UpdateW1(m, st, s.err, a, s.w1a, i, d, e);
  team.Sync();
}

// One token (row, 0-based position pos) of one head: hope_memory.h's steps 1–7 over the memories of
// the call (HopeFeatures: the producers; HopeMemWrite: M_mem from the given features; HopeMemory: all).
template <class Team>
MCSERVE_TEAM_FN void Token(const HopeScanParams& p, const HopeHead& hd, const HopeScratch& s, int64_t row,
                           int64_t pos, const Team& team) {
  team.Sync();  // the previous token is done with the scratch
  if (hd.producers > 0) {
    const float* x = p.x + (row * p.heads + hd.head) * p.d;
    for (int c = team.tid; c < p.d; c += team.size) s.x[c] = x[c];
  }
  Refresh(p, hd, pos, team);
  if (hd.producers > 0) {
    Producers(p, hd, s, row, team);
    Features(p, hd, s, row, team);
    if (!hd.has_mem) StoreFeatures(p, hd, s, row, team);
  } else {
    LoadFeatures(p, hd, s, row, team);
  }
  const HopeMlp& mem = hd.mlp[hd.count - 1];
  if (hd.has_mem && p.opt.read_anchor) {
    Read(p, hd, mem.anchor, s, row, team);
  } else if (hd.has_mem && !p.opt.read_after_write) {
    Read(p, hd, mem.run, s, row, team);
  }
  for (int i = 0; i < hd.count; ++i) Write(p, hd.mlp[i], s, team);
  if (hd.has_mem && !p.opt.read_anchor && p.opt.read_after_write) Read(p, hd, mem.run, s, row, team);
}

// Sequence b, head h: its tokens in order. Rows outside [0, T) skip the sequence; a slot outside
// [0, num_slots) or a negative phase (device-side values) gives NaN outputs and no state writes.
template <class Team>
MCSERVE_TEAM_FN void ScanHead(const HopeScanParams& p, int64_t b, int64_t h, float* scratch, const Team& team) {
  const int64_t begin = p.cu[b], end = p.cu[b + 1];
  if (begin < 0 || end < begin || end > p.t) return;
  const int64_t slot = p.slots[b], phase = p.phase[b];
  if (slot < 0 || slot >= p.num_slots || phase < 0) {
    float* outs[4] = {p.out, p.q_out, p.k_out, p.v_out};
    for (int64_t t = begin; t < end; ++t) {
      for (float* o : outs) {
        for (int c = team.tid; o != nullptr && c < p.d; c += team.size) o[(t * p.heads + h) * p.d + c] = NAN;
      }
      if (p.alpha_out != nullptr && team.tid == 0) p.alpha_out[t * p.heads + h] = p.eta_out[t * p.heads + h] = NAN;
    }
    return;
  }
  const HopeHead hd = MakeHead(p, slot, h);
  const HopeScratch s = CarveScratch(scratch, p.d, p.e);
  for (int64_t t = begin; t < end; ++t) Token(p, hd, s, t, phase + (t - begin), team);
}

}  // namespace mcserve::kernels::hope_memory_math
