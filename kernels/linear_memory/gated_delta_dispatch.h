// Which vector kernel runs the gated delta rule's per-token step: AVX-512 where the CPU has it
// (gated_delta_avx512.h), else AVX2 (gated_delta_avx2.h), for V ∈ {32, 64, 128}; other widths, and tests
// that ask for it, run the generic step (linear_memory_math.h). Both kernels are bit-identical to it.
#pragma once

namespace mcserve::kernels::internal {

// One token of one head (GatedDeltaStepAvx512's contract): S, q, k, v, α, β, K, V, o, the next head's
// memory (or null) and how many of its bytes to ask for.
using GatedDeltaStepFn = void (*)(float* S, const float* q, const float* k, const float* v, float alpha, float beta,
                                  int K, int V, float* o, const float* next, int prefetch_bytes);

// The vector step for value width V on this CPU, or null for the generic step. Any thread.
GatedDeltaStepFn GatedDeltaVectorStep(int V);

// Tests: true makes GatedDeltaVectorStep return null (the generic step runs), false restores it. Not
// while a LinearMemory call runs.
void ForceGenericGatedDeltaForTesting(bool force);

}  // namespace mcserve::kernels::internal
