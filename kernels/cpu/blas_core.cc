#include "kernels/cpu/blas_core.h"

#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "kernels/cpu/isa.h"

// OpenBLAS (DYNAMIC_ARCH builds): the name of the core whose kernels it loaded; not in cblas.h.
extern "C" char* openblas_get_corename(void);

namespace mcserve::kernels::cpu {
namespace {

// OpenBLAS 0.3.21's x86-64 cores whose kernels use AVX2 or newer.
constexpr std::array<std::string_view, 6> kAvx2Cores = {"Haswell",        "Zen",      "SkylakeX", "Cooperlake",
                                                        "SapphireRapids", "Excavator"};

}  // namespace

CpuVectorSupport DetectCpuVectorSupport() {
  __builtin_cpu_init();
  CpuVectorSupport cpu;
  cpu.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  cpu.avx512 = UseAvx512() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("avx512vl");
  return cpu;
}

std::optional<std::string> BetterBlasCore(std::string_view loaded, CpuVectorSupport cpu) {
  if (!cpu.avx2_fma) return std::nullopt;
  for (std::string_view core : kAvx2Cores) {
    if (loaded == core) return std::nullopt;
  }
  return std::string(cpu.avx512 ? "SkylakeX" : "Haswell");
}

std::string LoadedBlasCore() { return openblas_get_corename(); }

void ReexecForBlasCore(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;  // the user's choice, or already re-executed
  const std::string loaded = LoadedBlasCore();
  const std::optional<std::string> core = BetterBlasCore(loaded, DetectCpuVectorSupport());
  if (!core) return;
  if (setenv("OPENBLAS_CORETYPE", core->c_str(), 1) != 0) return;
  execv("/proc/self/exe", argv);
  std::fprintf(stderr, "OpenBLAS loaded its %s kernels; re-executing with OPENBLAS_CORETYPE=%s failed: %s\n",
               loaded.c_str(), core->c_str(), std::strerror(errno));
  unsetenv("OPENBLAS_CORETYPE");
}

}  // namespace mcserve::kernels::cpu
