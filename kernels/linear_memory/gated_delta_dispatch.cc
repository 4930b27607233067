#include "kernels/linear_memory/gated_delta_dispatch.h"

#include <atomic>

#include "kernels/cpu/isa.h"
#include "kernels/linear_memory/gated_delta_avx2.h"
#include "kernels/linear_memory/gated_delta_avx512.h"

namespace mcserve::kernels::internal {
namespace {

std::atomic<bool> force_generic{false};

}  // namespace

GatedDeltaStepFn GatedDeltaVectorStep(int V) {
  if (force_generic.load(std::memory_order_relaxed) || (V != 32 && V != 64 && V != 128)) return nullptr;
  return cpu::UseAvx512() ? &GatedDeltaStepAvx512 : &GatedDeltaStepAvx2;
}

void ForceGenericGatedDeltaForTesting(bool force) { force_generic.store(force, std::memory_order_relaxed); }

}  // namespace mcserve::kernels::internal
