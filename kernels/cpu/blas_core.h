// OpenBLAS on the kernels' CPU: Debian 12's OpenBLAS (0.3.21, built for every x86 core it knows)
// picks its kernels by CPU model when the library loads, before main, and names a model it does not
// know by its oldest core, "Prescott", running SSE3 kernels on it (an Intel Xeon with AVX-512 FP16,
// family 6 model 0xCF: an 8K-token prefill took 3.4-5.1 s instead of 1.3-1.4 s). Only the
// OPENBLAS_CORETYPE variable, read at load, changes that choice, so a main re-executes itself with it
// set (ReexecForBlasCore). Functions of their arguments, or the main thread before any other work.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace mcserve::kernels::cpu {

// The vector instructions OpenBLAS's Haswell and SkylakeX kernels need.
struct CpuVectorSupport {
  bool avx2_fma = false;  // AVX2 and FMA (Haswell)
  bool avx512 = false;    // AVX-512 F, CD, BW, DQ and VL (SkylakeX)
};

// This CPU's (AVX-512 off when MCSERVE_CPU_ISA=avx2, as for the kernels: isa.h).
CpuVectorSupport DetectCpuVectorSupport();

// The OpenBLAS core to ask for when `loaded` (openblas_get_corename()) is one whose kernels predate
// AVX2 while the CPU has it: "SkylakeX" with AVX-512, else "Haswell". nullopt when `loaded` already
// uses AVX2 or newer (OpenBLAS's own choice stands, e.g. "Zen" on an AVX-512 AMD) or the CPU lacks AVX2.
std::optional<std::string> BetterBlasCore(std::string_view loaded, CpuVectorSupport cpu);

// The core OpenBLAS loaded, e.g. "Haswell".
std::string LoadedBlasCore();

// When OPENBLAS_CORETYPE is unset and BetterBlasCore names a core, re-executes this program
// (/proc/self/exe, the same argv and environment) with OPENBLAS_CORETYPE set to it; otherwise, or when
// the exec fails (a line on stderr), returns and OpenBLAS keeps its choice. First thing in main.
void ReexecForBlasCore(char** argv);

}  // namespace mcserve::kernels::cpu
