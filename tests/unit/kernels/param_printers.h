// How GoogleTest prints the kernels' enums when they are test parameters: by name ("bf16",
// "cuda-emu"), so a failing case says which one it is rather than its bytes.
#pragma once

#include <ostream>

#include "kernels/core/dtype.h"

namespace mcserve::kernels {

inline void PrintTo(DType t, std::ostream* os) { *os << DTypeName(t); }
inline void PrintTo(Device d, std::ostream* os) { *os << DeviceName(d); }

}  // namespace mcserve::kernels
