// ScorePages, ScorePageHeads: the SSC router's and the softmax read-outs' (McReadout's and
// DeepMcReadout's) page scores on the CPU, ⟨u, pooled key⟩ for every page of a token's list, one head
// (several pages at a time) or every head (several heads of a page at a time). Bit-identical to
// mc_readout_math::Dot per score as the tests compile it (score_pages.cc fuses no product: a page
// scores the same wherever it sits in a list and whichever function scores it, which SSC's router and
// read-outs rely on; kernels/CMakeLists.txt).
// Any thread.
#pragma once

#include <cstdint>

namespace mcserve::kernels::internal {

// scores[i] = mc_readout_math::Dot(u, pooled[list[i]] + offset, k) for i < n. u [k]; pooled [pages]:
// each page's pooled keys, read at `offset` (h·K for state head h).
void ScorePages(const float* u, const float* const* pooled, const int32_t* list, int32_t n, int64_t offset, int k,
                float* scores);

// scores[h·stride + i] = mc_readout_math::Dot(u + h·k, pooled[list[i]] + h·k, k) for h < hs, i < n: one
// token's gate inputs u [Hs, K] against every head of n pages, page by page, each page's pooled keys
// [Hs, K] read once, front to back (the lists of a decode step stream through the keys side by side).
void ScorePageHeads(const float* u, const float* const* pooled, const int32_t* list, int32_t n, int64_t hs, int k,
                    float* scores, int64_t stride);

}  // namespace mcserve::kernels::internal
