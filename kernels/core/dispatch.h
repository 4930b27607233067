// DispatchOp: runs an op on the backend of ctx.device — the CPU code, the CUDA code (only in a build
// with nvcc), or the same CUDA source compiled for the CUDA emulator (kernels/cuda/emu/). Every op's
// <op>.cc calls it after validating its arguments.
#pragma once

#include <type_traits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/core/context.h"

namespace mcserve::kernels {

template <typename Args>
using OpFn = absl::Status (*)(const Context&, const Args&);

// `cuda` is null in a build without nvcc (MCSERVE_CUDA_FN gives that).
template <typename Args>
absl::Status DispatchOp(const Context& ctx, const char* op, std::type_identity_t<OpFn<Args>> cpu,
                        std::type_identity_t<OpFn<Args>> cuda, std::type_identity_t<OpFn<Args>> cuda_emu,
                        const Args& args) {
  switch (ctx.device) {
    case Device::kCpu:
      return cpu(ctx, args);
    case Device::kCuda:
      if (cuda == nullptr) return absl::UnimplementedError("built without CUDA");
      return cuda(ctx, args);
    case Device::kCudaEmu:
      return cuda_emu(ctx, args);
  }
  return absl::InternalError(absl::StrCat(op, ": unknown device"));
}

}  // namespace mcserve::kernels

// The CUDA entry point `fn` of an op, or nullptr in a build without nvcc.
#if defined(MCSERVE_WITH_CUDA)
#define MCSERVE_CUDA_FN(fn) (&fn)
#else
#define MCSERVE_CUDA_FN(fn) nullptr
#endif
