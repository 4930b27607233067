// The gated delta rule's per-token step (GatedDeltaStep in linear_memory_math.h) on AVX2 + FMA for
// V ∈ {32, 64, 128}, for CPUs without AVX-512: the columns run in chunks of 32 (4 ymm), each chunk's
// prediction u and read-out o in registers, its K rows read twice and written once while they stay in
// L1 (the generic step keeps u and o in memory, and writes the decayed row before rewriting it). A
// column's sums run in the generic step's order with the same fused multiply-adds, so the result is
// bit-identical to it. Any thread.
#pragma once

#include "kernels/linear_memory/gated_delta_token.h"

namespace mcserve::kernels::internal {

// One token of one head (gated_delta_token.h).
void GatedDeltaStepAvx2(const GatedDeltaToken& t);

}  // namespace mcserve::kernels::internal
