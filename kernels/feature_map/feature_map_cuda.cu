// CUDA FeatureMap. The affine maps of kHadamard / kHedgehog / kT2R (y = W x over all rows) go
// through the device runtime's Gemm into scratch rows, so out may alias x as on the CPU; the bias
// and the per-element / per-row nonlinearity then run in one of two kernels built on
// feature_map_math.h: an element-wise grid-stride kernel (identity, elu, relu, DPFP, T2R, Hadamard)
// and a block-per-row softmax kernel (Hedgehog).
#include <cstdint>

#include "kernels/core/dtype.h"
#include "base/status_macros.h"
#include "kernels/core/tensor_data.h"
#include "kernels/cuda/cuda_compat.h"
#include "kernels/cuda/load_widened.h"
#include "kernels/core/device_runtime.h"
#include "kernels/feature_map/feature_map.h"
#include "kernels/feature_map/feature_map_math.h"

namespace {

using mcserve::kernels::DType;
using mcserve::kernels::MCSERVE_CUDA_NS::LoadWidenedOrZero;
using mcserve::kernels::FeatureMapKind;

constexpr int kThreads = 256;       // element-wise kernel
constexpr int kMaxBlocks = 65535;   // element-wise grid cap (grid-stride beyond)
constexpr int kRowThreads = 128;    // Hedgehog kernel: 4 full warps per row
constexpr int kRowWarps = kRowThreads / 32;

// Inputs of the element-wise kernel. x [rows, d]; y1, y2 [rows, d] (W1 x, W2 x; null when unused);
// b1, b2 [d] or null; out [rows, out_dim].
struct ElementParams {
  FeatureMapKind kind;
  int64_t rows;
  int d, out_dim;
  const float *x, *y1, *y2;
  const void *b1, *b2;
  DType b1_dtype, b2_dtype;
  float* out;
};

// Launch: grid min(ceil(rows·out_dim / kThreads), kMaxBlocks), block kThreads, no shared memory;
// grid-stride over the rows·out_dim outputs. Each output reads only inputs of its own index (or,
// for DPFP, of its row of x, whose out never aliases x since the widths differ).
__global__ void FeatureMapElementwise(ElementParams p) {
  const int64_t n = p.rows * p.out_dim;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < n;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = idx / p.out_dim;
    const int e = static_cast<int>(idx % p.out_dim);
    float v = 0.0f;
    switch (p.kind) {
      case FeatureMapKind::kIdentity:
        v = p.x[idx];
        break;
      case FeatureMapKind::kElu:
        v = mcserve::kernels::FeatureMapElu(p.x[idx]);
        break;
      case FeatureMapKind::kRelu:
        v = mcserve::kernels::FeatureMapRelu(p.x[idx]);
        break;
      case FeatureMapKind::kT2R:
        v = mcserve::kernels::FeatureMapRelu(p.y1[idx] + LoadWidenedOrZero(p.b1, p.b1_dtype, e));
        break;
      case FeatureMapKind::kHadamard:
        v = (p.y1[idx] + LoadWidenedOrZero(p.b1, p.b1_dtype, e)) * (p.y2[idx] + LoadWidenedOrZero(p.b2, p.b2_dtype, e));
        break;
      case FeatureMapKind::kDpfp:
      case FeatureMapKind::kDpfp3: {  // out index e = (j − 1)·2d + i
        const int n2 = 2 * p.d;
        v = mcserve::kernels::DpfpElement(p.x + r * p.d, p.d, e / n2 + 1, e % n2);
        break;
      }
      case FeatureMapKind::kHedgehog:  // FeatureMapHedgehog
        break;
    }
    p.out[idx] = v;
  }
}

// Block-wide reduction (max when `is_max`, else sum) of one value per thread; every thread gets the
// result. `scratch` holds kRowWarps + 1 floats: per-warp partials, then the result. Back-to-back
// calls are safe: a call's partials are written only after every thread passed the previous call's
// last barrier, which thread 0 reaches after reading the previous partials.
__device__ float BlockReduce(float v, bool is_max, float* scratch) {
  for (int off = 16; off > 0; off /= 2) {
    const float o = __shfl_xor_sync(0xffffffffu, v, off);
    v = is_max ? fmaxf(v, o) : v + o;
  }
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    float acc = scratch[0];
    for (int w = 1; w < kRowWarps; ++w) acc = is_max ? fmaxf(acc, scratch[w]) : acc + scratch[w];
    scratch[kRowWarps] = acc;
  }
  __syncthreads();
  return scratch[kRowWarps];
}

// Hedgehog softmax over [2y, −2y] with y = W1 x + b1. y1 [rows, d]; out [rows, 2d].
// Launch: grid rows, block kRowThreads, static shared kRowWarps + 1 floats; threads stride over d.
__global__ void FeatureMapHedgehog(const float* __restrict__ y1, const void* __restrict__ b1, DType b1_dtype,
                                   int d, float* __restrict__ out) {
  __shared__ float scratch[kRowWarps + 1];
  const int64_t r = blockIdx.x;
  const float* yr = y1 + r * d;
  float* o = out + r * 2 * d;
  float m = 0.0f;  // the CPU's shift starts at 0 too
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    m = fmaxf(m, mcserve::kernels::HedgehogAbsLogit(yr[i] + LoadWidenedOrZero(b1, b1_dtype, i)));
  }
  m = BlockReduce(m, /*is_max=*/true, scratch);
  float sum = 0.0f;
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    const float y = yr[i] + LoadWidenedOrZero(b1, b1_dtype, i);
    o[i] = mcserve::kernels::HedgehogPos(y, m);
    o[d + i] = mcserve::kernels::HedgehogNeg(y, m);
    sum += o[i] + o[d + i];
  }
  const float inv = 1.0f / BlockReduce(sum, /*is_max=*/false, scratch);
  for (int i = threadIdx.x; i < d; i += blockDim.x) {  // the entries this thread wrote
    o[i] *= inv;
    o[d + i] *= inv;
  }
}

}  // namespace

namespace mcserve::kernels::internal::MCSERVE_CUDA_NS {

using ::mcserve::kernels::MCSERVE_CUDA_NS::KernelStream;

absl::Status FeatureMapCuda(const Context& ctx, const FeatureMapArgs& args) {
  const Tensor& x = *args.x;
  const int64_t d = x.dim(2), rows = x.dim(0) * x.dim(1);
  const int64_t out_dim = FeatureMapOutDim(args.kind, d);
  if (rows == 0 || d == 0) return absl::OkStatus();
  if (rows > 0x7fffffff || out_dim > 0x7fffffff) {
    return absl::InvalidArgumentError("FeatureMap: too many rows or features for one CUDA launch");
  }
  const FeatureMapKind kind = args.kind;
  const bool layer1 = kind == FeatureMapKind::kHadamard || kind == FeatureMapKind::kHedgehog ||
                      kind == FeatureMapKind::kT2R;
  const bool layer2 = kind == FeatureMapKind::kHadamard;

  // y = x Wᵀ for the affine kinds, into scratch rows [rows, d] from the caching allocator.
  Tensor y1, y2;
  MCSERVE_ASSIGN_OR_RETURN(DeviceRuntime * runtime, RuntimeFor(x.device()));
  MCSERVE_ASSIGN_OR_RETURN(cudaStream_t stream, KernelStream());
  auto affine = [&](const Tensor* w, Tensor& y) -> absl::Status {
    MCSERVE_ASSIGN_OR_RETURN(y, Tensor::Zeros(DType::kF32, {rows, d}, x.device()));
    return runtime->Gemm(DeviceGemmArgs{.m = rows, .n = d, .k = d, .a = Data<float>(x), .b = RawData(*w),
                                        .b_dtype = w->dtype(), .c = Data<float>(y)});
  };
  if (layer1) MCSERVE_RETURN_IF_ERROR(affine(args.w1, y1));
  if (layer2) MCSERVE_RETURN_IF_ERROR(affine(args.w2, y2));
  const void* b1 = args.b1 != nullptr ? RawData(*args.b1) : nullptr;
  const void* b2 = args.b2 != nullptr ? RawData(*args.b2) : nullptr;
  const DType b1_dtype = args.b1 != nullptr ? args.b1->dtype() : DType::kF32;
  const DType b2_dtype = args.b2 != nullptr ? args.b2->dtype() : DType::kF32;
  float* out = Data<float>(*args.out);

  if (kind == FeatureMapKind::kHedgehog) {
    MCSERVE_LAUNCH(FeatureMapHedgehog, static_cast<unsigned>(rows), kRowThreads, 0, stream)
    (Data<float>(y1), b1, b1_dtype, static_cast<int>(d), out);
    return ::mcserve::kernels::MCSERVE_CUDA_NS::TakeLaunchStatus("FeatureMapHedgehog");
  }
  const ElementParams p{.kind = kind, .rows = rows, .d = static_cast<int>(d), .out_dim = static_cast<int>(out_dim),
                        .x = Data<float>(x), .y1 = layer1 ? Data<float>(y1) : nullptr,
                        .y2 = layer2 ? Data<float>(y2) : nullptr, .b1 = b1, .b2 = b2, .b1_dtype = b1_dtype,
                        .b2_dtype = b2_dtype, .out = out};
  const int64_t blocks = (rows * out_dim + kThreads - 1) / kThreads;
  MCSERVE_LAUNCH(FeatureMapElementwise, static_cast<unsigned>(blocks < kMaxBlocks ? blocks : kMaxBlocks), kThreads,
                 0, stream)
  (p);
  return ::mcserve::kernels::MCSERVE_CUDA_NS::TakeLaunchStatus("FeatureMapElementwise");
}

}  // namespace mcserve::kernels::internal::MCSERVE_CUDA_NS
