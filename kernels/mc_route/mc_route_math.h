// McRoute per-(token, state head) routine shared by the CPU and CUDA backends (plain C++, nvcc-ready).
// It is McReadout's kTopKSoftmax selection — the same Dot and MarkTopK (mc_readout_math.h) — with the
// kept entries written out as page indices instead of being read.
#pragma once

#include <cstdint>

#include "kernels/core/hd.h"
#include "kernels/mc_readout/mc_readout_math.h"

namespace mcserve::kernels::mc_route_math {

// Keeps the top_k of scores [n] (the list's page scores): selected [top_k] gets the kept page indices
// (values of list [n]) in list order, then −1 up to top_k. keep [n] is scratch.
MCSERVE_HD void SelectTopK(const float* scores, const int32_t* list, int n, int top_k, unsigned char* keep,
                           int32_t* selected) {
  mc_readout_math::MarkTopK(scores, n, top_k, keep);
  int out = 0;
  for (int i = 0; i < n && out < top_k; ++i) {
    if (keep[i] != 0) selected[out++] = list[i];
  }
  for (; out < top_k; ++out) selected[out] = -1;
}

// Routes one (token, head). list [n]: the token's page indices; pooled [num_pages]: each page's pooled
// keys [Hs, K], read at head_offset = h·K; u [K]: the gate input. scores [n] and keep [n] are scratch
// (may be null when n = 0). selected [top_k] (top_k ≥ 1) gets the kept page indices in list order,
// then −1 up to top_k.
MCSERVE_HD void RouteHead(const float* u, const float* const* pooled, int64_t head_offset, const int32_t* list, int n,
                          int k, int top_k, float* scores, unsigned char* keep, int32_t* selected) {
  for (int i = 0; i < n; ++i) scores[i] = mc_readout_math::Dot(u, pooled[list[i]] + head_offset, k);
  SelectTopK(scores, list, n, top_k, keep, selected);
}

}  // namespace mcserve::kernels::mc_route_math
