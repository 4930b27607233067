// The execution context every op receives: which device runs it and the CPU thread pool.
#pragma once

#include "kernels/core/dtype.h"

namespace mcserve::kernels {
namespace cpu {
class ThreadPool;
}

struct Context {
  Device device = Device::kCpu;
  cpu::ThreadPool* pool = nullptr;  // CPU backend; null runs single-threaded
};

}  // namespace mcserve::kernels
