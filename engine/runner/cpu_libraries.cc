#include "engine/runner/cpu_libraries.h"

#include "kernels/cpu/blas_core.h"

namespace mcserve::engine {

void PrepareCpuLibraries(char** argv) { kernels::cpu::ReexecForBlasCore(argv); }

}  // namespace mcserve::engine
