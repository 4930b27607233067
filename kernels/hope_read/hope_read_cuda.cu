// CUDA HopeRead: one thread per (row, head) running hope_read_math.h's serial head, so the result is
// bit-identical to the CPU's. Launch shape: 1-D grid of 64-thread blocks over n·H; no shared memory
// (the op's global workspace holds each head's scratch).
#include <cstdint>

#include "base/status_macros.h"
#include "kernels/core/tensor_data.h"
#include "kernels/cuda/cuda_compat.h"
#include "kernels/hope_read/hope_read.h"
#include "kernels/hope_read/hope_read_math.h"

namespace {

namespace km = ::mcserve::kernels;
namespace rm = ::mcserve::kernels::hope_read_math;

constexpr int kBlock = 64;

// The sizes of one call.
struct Dims {
  int64_t n, heads, d, e, k;
  int64_t p, offset;  // floats per head row of memory, and where the read's W2 starts in it
  bool query;
};

// Item i = row·H + head < n·H.
__global__ void HopeReadKernel(const float* q_pre, const float* window, const float* conv, const float* memory,
                               const float* dy, float* work, float* out, Dims m, km::HopeActivation act) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= m.n * m.heads) return;
  const int64_t r = i / m.heads, h = i % m.heads, d = m.d;
  rm::ReadHead({.q_pre = q_pre + i * d,
                .window = window ? window + r * (m.k - 1) * m.heads * d + h * d : nullptr,
                .conv = conv ? conv + h * d * m.k : nullptr, .w = memory + i * m.p + m.offset,
                .dy = dy ? dy + i * d : nullptr,
                .work = work + i * (3 * d + 2 * m.e), .out = out + i * d, .stride = m.heads * d,
                .d = static_cast<int>(d), .e = static_cast<int>(m.e), .k = static_cast<int>(m.k), .act = act,
                .query = m.query});
}

}  // namespace

namespace mcserve::kernels::internal::MCSERVE_CUDA_NS {

using ::mcserve::kernels::MCSERVE_CUDA_NS::KernelStream;
using ::mcserve::kernels::MCSERVE_CUDA_NS::TakeLaunchStatus;

absl::Status HopeReadCuda(const Context&, const HopeReadCall& call) {
  const HopeReadArgs& a = call.args;
  const Dims m{.n = a.q_pre->dim(0), .heads = a.q_pre->dim(1), .d = a.q_pre->dim(2),
               .e = a.expansion * a.q_pre->dim(2), .k = a.query ? a.q_conv->dim(2) : 1, .p = a.memory->dim(2),
               .offset = a.weights_offset, .query = a.query};
  if (m.n * m.heads == 0) return absl::OkStatus();
  MCSERVE_ASSIGN_OR_RETURN(cudaStream_t stream, KernelStream());
  MCSERVE_LAUNCH(HopeReadKernel, static_cast<int>((m.n * m.heads + kBlock - 1) / kBlock), kBlock, 0, stream)
  (Data<float>(*a.q_pre), a.window ? Data<float>(*a.window) : nullptr, a.q_conv ? Data<float>(*a.q_conv) : nullptr,
   Data<float>(*a.memory), a.dy ? Data<float>(*a.dy) : nullptr, Data<float>(*call.work), Data<float>(*a.out), m,
   a.activation);
  return TakeLaunchStatus("HopeRead");
}

}  // namespace mcserve::kernels::internal::MCSERVE_CUDA_NS
