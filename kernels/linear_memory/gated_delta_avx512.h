// The gated delta rule's per-token step (GatedDeltaStep in linear_memory_math.h) on AVX-512 for
// V ∈ {32, 64, 128}: the prediction u and the read-out o stay in registers, and each row of S is read
// twice and written once (the generic step writes the decayed row and then rewrites it). Every sum
// runs in the generic step's order with the same fused multiply-adds, so the result is bit-identical
// to it. Chosen at run time (gated_delta_dispatch.h); any thread.
#pragma once

#include "kernels/linear_memory/gated_delta_token.h"

namespace mcserve::kernels::internal {

// One token of one head (gated_delta_token.h). Call only where cpu::UseAvx512().
void GatedDeltaStepAvx512(const GatedDeltaToken& t);

}  // namespace mcserve::kernels::internal
