// The process-wide set-up the CPU kernels' libraries need before anything else runs: OpenBLAS's
// choice of kernels (kernels/cpu/blas_core.h), for the binaries, which reach the kernels only
// through the engine. Main thread, first thing in main.
#pragma once

namespace mcserve::engine {

// Re-executes this program with OPENBLAS_CORETYPE set when OpenBLAS loaded kernels older than the
// CPU supports and the variable is unset (kernels::cpu::ReexecForBlasCore); else returns.
void PrepareCpuLibraries(char** argv);

}  // namespace mcserve::engine
