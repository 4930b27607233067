// Which x86 vector instructions the CPU kernels use, chosen once at run time: the same binary runs its
// AVX2 kernels where AVX-512 is absent, and MCSERVE_CPU_ISA=avx2 (or a test) forces them anywhere.
#pragma once

namespace mcserve::kernels::cpu {

// Whether the kernels may use AVX-512F/BW: the CPU has both, MCSERVE_CPU_ISA is not "avx2" (read
// once), and no test forced the AVX2 paths. Any thread.
bool UseAvx512();
// Tests: true forces the AVX2 paths, false restores the run-time choice. Not while a kernel runs.
void ForceAvx2ForTesting(bool force);

}  // namespace mcserve::kernels::cpu
