// CUDA ShortConv: one thread per (sequence, channel). A channel's causal convolution and its W−1
// history are independent of every other channel, so a thread walks its sequence's tokens in order,
// reading the history from the sequence's state slot (slot id and bounds read inside the kernel),
// and finally rewrites that channel's history in place. No shared memory, no barriers.
// The batch layout lives on the device, so it is checked here: a sequence whose rows fall outside
// [0, T) is skipped, and one whose slot is outside [0, num_slots) gets NaN outputs and leaves every
// slot alone (the host-side validation cannot read device metadata).
#include <cstdint>

#include "kernels/core/dtype.h"
#include "base/status_macros.h"
#include "kernels/core/tensor_data.h"
#include "kernels/cuda/cuda_compat.h"
#include "kernels/cuda/load_widened.h"
#include "kernels/short_conv/short_conv.h"
#include "kernels/short_conv/short_conv_math.h"

namespace {

using mcserve::kernels::DType;
using mcserve::kernels::MCSERVE_CUDA_NS::LoadWidened;

constexpr int kThreads = 128;  // channels per block

// Launch: grid (num_seqs, ceil(D / kThreads)), block kThreads, no shared memory.
// x, out: [T, D]; weight: [D, 1, W] (w_dtype); bias: [D] (b_dtype) or null; state: [slots, W−1, D];
// cu: [B + 1]; slots: [B].
__global__ void ShortConvKernel(const float* __restrict__ x, const void* __restrict__ weight, DType w_dtype,
                                const void* __restrict__ bias, DType b_dtype, bool silu, const int32_t* cu,
                                const int32_t* slots, float* __restrict__ state, float* __restrict__ out, int width,
                                int64_t d, int64_t rows, int64_t num_slots) {
  const int64_t b = blockIdx.x;
  const int64_t c = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  if (c >= d) return;
  const int hist = width - 1;
  const int64_t begin = cu[b];
  const int64_t len = cu[b + 1] - begin;
  if (begin < 0 || len < 0 || begin + len > rows) return;
  const float* xs = x + begin * d;
  float* os = out + begin * d;
  const int64_t slot = slots[b];
  if (slot < 0 || slot >= num_slots) {
    for (int64_t t = 0; t < len; ++t) os[t * d + c] = __int_as_float(0x7fc00000);  // quiet NaN
    return;
  }
  float* st = state + slot * hist * d;
  const float bc = bias != nullptr ? LoadWidened(bias, b_dtype, c) : 0.0f;
  for (int64_t t = 0; t < len; ++t) {
    float acc = 0.0f;
    for (int j = 0; j < width; ++j) {
      const float* src = mcserve::kernels::ShortConvSourceRow(st, xs, t - hist + j, width, d);
      acc += LoadWidened(weight, w_dtype, c * width + j) * src[c];
    }
    os[t * d + c] = mcserve::kernels::ShortConvFinish(acc, bc, silu);
  }
  // New history: the last W−1 inputs of (old history ++ this chunk), oldest first. Rows move
  // towards the front, so ascending order reads each old row before it is overwritten.
  if (hist == 0 || len == 0) return;
  const int64_t keep = hist - len > 0 ? hist - len : 0;
  for (int64_t i = 0; i < keep; ++i) st[i * d + c] = st[(i + len) * d + c];
  for (int64_t i = keep; i < hist; ++i) st[i * d + c] = xs[(len - hist + i) * d + c];
}

}  // namespace

namespace mcserve::kernels::internal::MCSERVE_CUDA_NS {

using ::mcserve::kernels::MCSERVE_CUDA_NS::KernelStream;

absl::Status ShortConvCuda(const Context& ctx, const ShortConvArgs& args) {
  const int64_t d = args.x->dim(1);
  const int width = static_cast<int>(args.weight->dim(2));
  const int64_t num_seqs = args.layout.slot_ids->dim(0);
  if (num_seqs == 0 || d == 0) return absl::OkStatus();
  MCSERVE_ASSIGN_OR_RETURN(cudaStream_t stream, KernelStream());
  const dim3 grid(static_cast<unsigned>(num_seqs), static_cast<unsigned>((d + kThreads - 1) / kThreads));
  const void* bias = args.bias != nullptr ? RawData(*args.bias) : nullptr;
  const DType b_dtype = args.bias != nullptr ? args.bias->dtype() : DType::kF32;
  MCSERVE_LAUNCH(ShortConvKernel, grid, kThreads, 0, stream)
  (Data<float>(*args.x), RawData(*args.weight), args.weight->dtype(), bias, b_dtype, args.silu,
   Data<int32_t>(*args.layout.cu_seqlens), Data<int32_t>(*args.layout.slot_ids), Data<float>(*args.state),
   Data<float>(*args.out), width, d, args.x->dim(0), args.state->dim(0));
  return ::mcserve::kernels::MCSERVE_CUDA_NS::TakeLaunchStatus("ShortConv");
}

}  // namespace mcserve::kernels::internal::MCSERVE_CUDA_NS
