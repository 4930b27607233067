// CUDA Gate: per-element decay factors with gate_math.h, one flat grid-stride loop over [T, n].
// kSoftplusDecay reads a_log[h] and dt_bias[h] (h = i mod n; each F32, BF16 or F16) per element.
//
// Launch shape (both kernels): block = 256 threads, grid = min(ceil(T·n / 256), 65535) blocks, no
// shared memory; each thread handles elements i, i + gridDim·blockDim, ... so any size is covered.
#include <algorithm>
#include <cstdint>

#include "base/status_macros.h"
#include "kernels/core/tensor_data.h"
#include "kernels/cuda/cuda_compat.h"
#include "kernels/gate/gate.h"
#include "kernels/gate/gate_math.h"

namespace {

namespace km = ::mcserve::kernels;
namespace gm = ::mcserve::kernels::gate_math;

constexpr int kBlock = 256;
constexpr int64_t kMaxBlocks = 65535;

// Element c of a per-head vector stored as `dtype` (F32, BF16 or F16), widened to F32.
__device__ __forceinline__ float LoadHead(const void* v, km::DType dtype, int64_t c) {
  switch (dtype) {
    case km::DType::kBF16: return km::Bf16ToF32(static_cast<const uint16_t*>(v)[c]);
    case km::DType::kF16: return km::F16ToF32(static_cast<const uint16_t*>(v)[c]);
    default: return static_cast<const float*>(v)[c];
  }
}

// out[t, h] = exp(−exp(a_log[h]) · softplus(x[t, h] + dt_bias[h])); x, out: [total / n, n].
__global__ void SoftplusDecayKernel(const float* x, const void* a_log, km::DType a_dtype, const void* dt_bias,
                                    km::DType dt_dtype, int64_t n, int64_t total, float* out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t h = i % n;
    out[i] = gm::SoftplusDecay(x[i], LoadHead(a_log, a_dtype, h), LoadHead(dt_bias, dt_dtype, h));
  }
}

// out[i] = exp(max(logsigmoid(x[i]) / normalizer, clamp_min)); x, out: [total].
__global__ void LogSigmoidDecayKernel(const float* x, float normalizer, bool has_clamp, float clamp_min,
                                      int64_t total, float* out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    out[i] = gm::LogSigmoidDecay(x[i], normalizer, has_clamp, clamp_min);
  }
}

}  // namespace

namespace mcserve::kernels::internal::MCSERVE_CUDA_NS {

using ::mcserve::kernels::MCSERVE_CUDA_NS::KernelStream;
using ::mcserve::kernels::MCSERVE_CUDA_NS::TakeLaunchStatus;

absl::Status GateCuda(const Context& ctx, const GateArgs& args) {
  const int64_t n = args.x->dim(1), total = args.x->numel();
  if (total == 0) return absl::OkStatus();
  MCSERVE_ASSIGN_OR_RETURN(cudaStream_t stream, KernelStream());
  const int grid = static_cast<int>(std::min<int64_t>((total + kBlock - 1) / kBlock, kMaxBlocks));
  const float* x = Data<float>(*args.x);
  float* out = Data<float>(*args.out);
  if (args.kind == GateKind::kSoftplusDecay) {
    MCSERVE_LAUNCH(SoftplusDecayKernel, grid, kBlock, 0, stream)
    (x, RawData(*args.a_log), args.a_log->dtype(), RawData(*args.dt_bias), args.dt_bias->dtype(), n, total, out);
  } else {
    MCSERVE_LAUNCH(LogSigmoidDecayKernel, grid, kBlock, 0, stream)
    (x, args.normalizer, args.has_clamp_min, args.clamp_min, total, out);
  }
  return TakeLaunchStatus("Gate");
}

}  // namespace mcserve::kernels::internal::MCSERVE_CUDA_NS
