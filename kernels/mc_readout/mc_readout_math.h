// McReadout per-(token, state head) math shared by the CPU and CUDA backends (plain C++, nvcc-ready):
// gate scores, deterministic top-k, a max-subtracted softmax over the selected pages and the online
// memory, and the weighted read-out y += Sᵀ(γ q). Memories are row-major [K, V] ("K-first").
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/core/hd.h"

#if defined(__CUDACC__) || defined(__GNUC__)
#define MCSERVE_MC_RESTRICT __restrict__
#else
#define MCSERVE_MC_RESTRICT
#endif

namespace mcserve::kernels::mc_readout_math {

// Dot's 8 partial sums added in its fixed order.
MCSERVE_HD float SumLanes(const float* acc) {
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

// ⟨a, b⟩ over n floats; 8 partial sums in a fixed order (vectorisable, deterministic).
MCSERVE_HD float Dot(const float* MCSERVE_MC_RESTRICT a, const float* MCSERVE_MC_RESTRICT b, int n) {
  float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) acc[l] += a[i + l] * b[i + l];
  }
  float s = SumLanes(acc);
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

// True when entry a (score za) ranks before entry b in the router's order: higher score first,
// ties to the lower position in the token's page list.
MCSERVE_HD bool RanksBefore(float za, int a, float zb, int b) { return za > zb || (za == zb && a < b); }

// The largest top_k that TopKPositions takes (held in registers); larger ones take MarkTopK's passes.
constexpr int kMaxOnePassTopK = 8;

// pos [top_k] = the positions of the top_k entries of scores [n] by RanksBefore, ascending, in one pass
// that keeps the best top_k so far (n > top_k, 1 ≤ top_k ≤ kMaxOnePassTopK). False when a score is NaN:
// RanksBefore is then no order, and MarkTopK's passes define the picks.
MCSERVE_HD bool TopKPositions(const float* scores, int n, int top_k, int* pos) {
  float best_z[kMaxOnePassTopK];
  int best_i[kMaxOnePassTopK];
  int count = 0;
  for (int i = 0; i < n; ++i) {
    const float z = scores[i];
    if (z != z) return false;
    // Entry i ranks before a kept entry exactly when its score is higher: every kept position is lower.
    if (count == top_k && !(z > best_z[top_k - 1])) continue;
    int j = count < top_k ? count++ : top_k - 1;
    for (; j > 0 && z > best_z[j - 1]; --j) {
      best_z[j] = best_z[j - 1];
      best_i[j] = best_i[j - 1];
    }
    best_z[j] = z;
    best_i[j] = i;
  }
  for (int a = 0; a < top_k; ++a) {  // ascending positions
    int b = a;
    for (; b > 0 && pos[b - 1] > best_i[a]; --b) pos[b] = pos[b - 1];
    pos[b] = best_i[a];
  }
  return true;
}

// keep [n] = 1 for the top_k entries of scores [n] by RanksBefore (all of them when n ≤ top_k), else 0.
// One pass (TopKPositions) for top_k ≤ kMaxOnePassTopK and scores without NaN; otherwise O(n·top_k)
// without scratch: pass r picks the best entry ranking after pass r−1's pick.
MCSERVE_HD void MarkTopK(const float* scores, int n, int top_k, unsigned char* keep) {
  if (n <= top_k) {
    for (int i = 0; i < n; ++i) keep[i] = 1;
    return;
  }
  for (int i = 0; i < n; ++i) keep[i] = 0;
  int pos[kMaxOnePassTopK];
  if (top_k >= 1 && top_k <= kMaxOnePassTopK && TopKPositions(scores, n, top_k, pos)) {
    for (int a = 0; a < top_k; ++a) keep[pos[a]] = 1;
    return;
  }
  int prev = -1;
  float prev_z = 0.0f;
  for (int r = 0; r < top_k; ++r) {
    int best = -1;
    for (int i = 0; i < n; ++i) {
      if (prev >= 0 && !RanksBefore(prev_z, prev, scores[i], i)) continue;  // already taken or better
      if (best < 0 || RanksBefore(scores[i], i, scores[best], best)) best = i;
    }
    if (best < 0) break;  // only reachable with NaN scores
    keep[best] = 1;
    prev = best;
    prev_z = scores[best];
  }
}

// Softmax over the kept entries of w [n] (in: scores z_i; out: weights γ_i, exactly 0 for dropped
// entries) together with the online score z_on; returns γ_on. keep [n] may be null (all kept).
// Max-subtracted, so every exp argument is ≤ 0. With no kept entry γ_on is exactly 1.
MCSERVE_HD float SoftmaxWithOnline(float* w, const unsigned char* keep, int n, float z_on) {
  float m = z_on;
  int kept = 0;
  for (int i = 0; i < n; ++i) {
    if (keep == nullptr || keep[i] != 0) {
      m = fmaxf(m, w[i]);
      ++kept;
    }
  }
  if (kept == 0) {
    for (int i = 0; i < n; ++i) w[i] = 0.0f;
    return 1.0f;
  }
  const float e_on = expf(z_on - m);
  float sum = e_on;
  for (int i = 0; i < n; ++i) {
    w[i] = (keep == nullptr || keep[i] != 0) ? expf(w[i] - m) : 0.0f;
    sum += w[i];
  }
  for (int i = 0; i < n; ++i) w[i] /= sum;
  return e_on / sum;
}

// SoftmaxWithOnline(w, keep, n, z_on) where keep marks exactly the `kept` positions pos (ascending, at
// most kMaxOnePassTopK), reading only those entries: the same max, exps and sum in the same order (the
// dropped entries' zeros add nothing), so the same bits (NaN sums included).
MCSERVE_HD float SoftmaxAtPositions(float* w, int n, const int* pos, int kept, float z_on) {
  float m = z_on;
  for (int a = 0; a < kept; ++a) m = fmaxf(m, w[pos[a]]);
  const float e_on = expf(z_on - m);
  float sum = e_on;
  float e[kMaxOnePassTopK];
  for (int a = 0; a < kept; ++a) {
    e[a] = expf(w[pos[a]] - m);
    sum += e[a];
  }
  const float dropped = 0.0f / sum;  // 0, or NaN as SoftmaxWithOnline's when the sum is NaN
  for (int i = 0; i < n; ++i) w[i] = dropped;
  for (int a = 0; a < kept; ++a) w[pos[a]] = e[a] / sum;
  return e_on / sum;
}

// Gate weights of one (token, head) for the softmax kinds. scores [n]: in z_i = ⟨u, pool_i⟩, out γ_i;
// top_k ≤ 0 keeps every page (kSoftmax), else the top_k by RanksBefore (kTopKSoftmax); keep: [n]
// scratch (unused when top_k ≤ 0 or n ≤ top_k, or when the one-pass top-k applies). Returns γ_on.
MCSERVE_HD float GateWeights(float* scores, int n, float z_on, int top_k, unsigned char* keep) {
  if (top_k <= 0 || n <= top_k) return SoftmaxWithOnline(scores, nullptr, n, z_on);
  int pos[kMaxOnePassTopK];
  if (top_k <= kMaxOnePassTopK && TopKPositions(scores, n, top_k, pos)) {
    return SoftmaxAtPositions(scores, n, pos, top_k, z_on);
  }
  MarkTopK(scores, n, top_k, keep);
  return SoftmaxWithOnline(scores, keep, n, z_on);
}

// y [V] = g · o [V] (y may alias o).
MCSERVE_HD void ScaleOnline(const float* o, float g, int V, float* y) {
  for (int j = 0; j < V; ++j) y[j] = g * o[j];
}

// Column j of Sᵀq: Σ_k q[k]·S[k, j] for a head memory S [K, V] and query q [K], k ascending (the CUDA
// kernel's per-thread read-out of one page).
MCSERVE_HD float ReadOutColumn(const float* MCSERVE_MC_RESTRICT S, const float* MCSERVE_MC_RESTRICT q, int K, int V,
                               int j) {
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc += q[k] * S[static_cast<int64_t>(k) * V + j];
  return acc;
}

}  // namespace mcserve::kernels::mc_readout_math
