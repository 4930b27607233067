// Which vector kernel runs the gated delta rule's per-token step: AVX-512 where the CPU has it
// (gated_delta_avx512.h), else AVX2 (gated_delta_avx2.h), for V ∈ {32, 64, 128}; other widths, and tests
// that ask for it, run the generic step (linear_memory_math.h). Both kernels are bit-identical to it.
#pragma once

#include "kernels/linear_memory/gated_delta_token.h"

namespace mcserve::kernels::internal {

// One token of one head (gated_delta_token.h).
using GatedDeltaStepFn = void (*)(const GatedDeltaToken& t);

// The vector step for value width V on this CPU, or null for the generic step. Any thread.
GatedDeltaStepFn GatedDeltaVectorStep(int V);

// Tests: true makes GatedDeltaVectorStep return null (the generic step runs), false restores it. Not
// while a LinearMemory call runs.
void ForceGenericGatedDeltaForTesting(bool force);

}  // namespace mcserve::kernels::internal
