// AccumulateReadOut: one cached page's weighted read-out added to a token's output on the CPU,
// y += Sᵀ(g·q), the loop the CPU read-out (McReadoutCpu) runs for each page a decode token keeps.
// Any thread.
#pragma once

namespace mcserve::kernels::internal {

// y [V] += Sᵀ(g·q) for one page's head memory S [K, V] (row-major) and query q [K]: with x_k = g·q[k]
// (rounded), y[j] = fma(x_k, S[k, j], y[j]) for k ascending, whatever the column and V.
void AccumulateReadOut(const float* S, const float* q, float g, int K, int V, float* y);

}  // namespace mcserve::kernels::internal
