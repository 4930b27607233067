// The gated delta rule's per-token step (GatedDeltaStep in linear_memory_math.h) on AVX-512 for
// V ∈ {32, 64, 128}: the prediction u and the read-out o stay in registers, and each row of S is read
// twice and written once (the generic step writes the decayed row and then rewrites it). Every sum
// runs in the generic step's order with the same fused multiply-adds, so the result is bit-identical
// to it. Chosen at run time (gated_delta_dispatch.h); any thread.
#pragma once

namespace mcserve::kernels::internal {

// One token of one head: S [K, V] = α S; u = β (v − Sᵀk); S += k uᵀ; o [V] = Sᵀ q. Before it
// returns, the first `prefetch_bytes` of `next` (the next head's state, or null) are asked for.
// V ∈ {32, 64, 128}; call only where cpu::UseAvx512().
void GatedDeltaStepAvx512(float* S, const float* q, const float* k, const float* v, float alpha, float beta, int K,
                          int V, float* o, const float* next, int prefetch_bytes);

}  // namespace mcserve::kernels::internal
