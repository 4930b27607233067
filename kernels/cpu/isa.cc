#include "kernels/cpu/isa.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace mcserve::kernels::cpu {
namespace {

std::atomic<bool> force_avx2{false};

bool CpuHasAvx512() {
  static const bool has = [] {
    const char* isa = std::getenv("MCSERVE_CPU_ISA");
    if (isa != nullptr && std::strcmp(isa, "avx2") == 0) return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  }();
  return has;
}

}  // namespace

bool UseAvx512() { return CpuHasAvx512() && !force_avx2.load(std::memory_order_relaxed); }

void ForceAvx2ForTesting(bool force) { force_avx2.store(force, std::memory_order_relaxed); }

}  // namespace mcserve::kernels::cpu
