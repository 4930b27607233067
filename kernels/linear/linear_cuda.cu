// CUDA Linear: out[m, n] (+)= x[m, k] · w[n, k]ᵀ through the device runtime's Gemm (cuBLAS on a
// GPU, OpenBLAS under the emulator), which takes F32/BF16/F16 weights as stored and accumulates in
// F32. No kernel of our own is launched, so there is no launch shape; k = 0 gives out = 0 (or out
// unchanged when accumulating), handled by the runtime.
#include "absl/strings/str_cat.h"
#include "kernels/core/status_macros.h"
#include "kernels/core/tensor_data.h"
#include "kernels/cuda/cuda_compat.h"
#include "kernels/cuda/device_runtime.h"
#include "kernels/linear/linear.h"
#include "kernels/linear/linear_math.h"

namespace mcserve::kernels::internal::MCSERVE_CUDA_NS {

absl::Status LinearCuda(const Context& ctx, const LinearArgs& args) {
  const Tensor &x = *args.x, &w = *args.w;
  const int64_t m = x.dim(0), k = x.dim(1), n = w.dim(0);
  if (m == 0 || n == 0) return absl::OkStatus();
  MCSERVE_ASSIGN_OR_RETURN(DeviceRuntime * rt, RuntimeFor(MCSERVE_CUDA_EMULATED ? Device::kCudaEmu : Device::kCuda));
  DeviceGemmArgs g;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = Data<float>(x);
  g.b = RawData(w);
  g.b_dtype = w.dtype();
  g.c = Data<float>(*args.out);
  g.stride_a = m * k;
  g.stride_b = n * k;
  g.stride_c = m * n;
  g.accumulate = args.accumulate;
  absl::Status s = rt->Gemm(g);
  if (!s.ok()) return absl::Status(s.code(), absl::StrCat("Linear: ", s.message()));
  return absl::OkStatus();
}

}  // namespace mcserve::kernels::internal::MCSERVE_CUDA_NS
