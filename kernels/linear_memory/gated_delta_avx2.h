// The gated delta rule's per-token step (GatedDeltaStep in linear_memory_math.h) on AVX2 + FMA for
// V ∈ {32, 64, 128}, for CPUs without AVX-512: the columns run in chunks of 32 (4 ymm), each chunk's
// prediction u and read-out o in registers, its K rows read twice and written once while they stay in
// L1 (the generic step keeps u and o in memory, and writes the decayed row before rewriting it). A
// column's sums run in the generic step's order with the same fused multiply-adds, so the result is
// bit-identical to it. Any thread.
#pragma once

namespace mcserve::kernels::internal {

// One token of one head, as GatedDeltaStepAvx512 (gated_delta_avx512.h): S [K, V] = α S;
// u = β (v − Sᵀk); S += k uᵀ; o [V] = Sᵀ q; the first `prefetch_bytes` of `next` (or null) asked for.
// V ∈ {32, 64, 128}.
void GatedDeltaStepAvx2(float* S, const float* q, const float* k, const float* v, float alpha, float beta, int K,
                        int V, float* o, const float* next, int prefetch_bytes);

}  // namespace mcserve::kernels::internal
