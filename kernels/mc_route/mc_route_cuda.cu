// CUDA McRoute: one thread per (token, state head), grid-stride over the T·Hs pairs in blocks of 128.
// Each thread runs the shared routine (mc_route_math::RouteHead: McReadout's Dot and MarkTopK), so
// the selection is the CPU's bit for bit. Its scores and keep flags live in a device scratch [Hs, P]
// (entry e of head h at h·P + e, so the pairs never share scratch). The page tensors are given on
// the host as a span: their device pointers are copied to a small device table for the launch.
// The CSR values are validated on the host by McRoute (ValidateCsr), so the kernel trusts them.
#include <cstdint>
#include <vector>

#include "base/status_macros.h"
#include "kernels/core/tensor_data.h"
#include "kernels/cuda/cuda_compat.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/core/device_runtime.h"
#include "kernels/mc_route/mc_route.h"
#include "kernels/mc_route/mc_route_math.h"

namespace {

namespace math = ::mcserve::kernels::mc_route_math;

constexpr unsigned kThreads = 128;
constexpr int64_t kMaxBlocks = 65535;

struct RouteParams {
  int64_t rows, hs, p;  // rows = T·Hs
  int k, top_k;
  const float* u;                        // [T, Hs, K]
  const float* const* pooled;            // [num_pages] → [Hs, K]
  const int32_t *offsets, *token_pages;  // [T + 1], [P]
  float* scores;                         // [Hs, P] scratch
  unsigned char* keep;                   // [Hs, P] scratch
  int32_t* selected;                     // [T, Hs, top_k]
};

// Launch: min(⌈T·Hs / 128⌉, 65535) × 128, no shared memory; row = token·Hs + head, grid-stride.
__global__ void RouteKernel(RouteParams pr) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; row < pr.rows; row += stride) {
    const int64_t token = row / pr.hs, h = row % pr.hs;
    const int32_t e0 = pr.offsets[token], n = pr.offsets[token + 1] - e0;
    float* scores = pr.scores == nullptr ? nullptr : pr.scores + h * pr.p + e0;
    unsigned char* keep = pr.keep == nullptr ? nullptr : pr.keep + h * pr.p + e0;
    math::RouteHead(pr.u + row * pr.k, pr.pooled, h * pr.k, pr.token_pages + e0, n, pr.k, pr.top_k, scores, keep,
                    pr.selected + row * pr.top_k);
  }
}

}  // namespace

namespace mcserve::kernels::internal::MCSERVE_CUDA_NS {

absl::Status McRouteCuda(const Context& ctx, const McRouteArgs& args) {
  const int64_t t = args.u->dim(0), hs = args.u->dim(1), k = args.u->dim(2);
  const int64_t p = args.token_pages->dim(0), num_pages = static_cast<int64_t>(args.pooled_keys.size());
  if (t == 0 || hs == 0) return absl::OkStatus();
  MCSERVE_ASSIGN_OR_RETURN(DeviceRuntime * rt, RuntimeFor(MCSERVE_CUDA_EMULATED ? Device::kCudaEmu : Device::kCuda));

  DeviceBuffer table(rt);  // pooled-key device pointers [num_pages]
  if (num_pages > 0) {
    std::vector<const float*> host(num_pages);
    for (int64_t i = 0; i < num_pages; ++i) host[i] = Data<float>(*args.pooled_keys[i]);
    const size_t bytes = host.size() * sizeof(const float*);
    MCSERVE_RETURN_IF_ERROR(table.Allocate(bytes));
    MCSERVE_RETURN_IF_ERROR(rt->CopyHostToDevice(table.get(), host.data(), bytes));
  }
  DeviceBuffer scratch(rt);  // scores [Hs, P] F32, then keep flags [Hs, P]
  if (p > 0) MCSERVE_RETURN_IF_ERROR(scratch.Allocate(static_cast<size_t>(hs * p) * (sizeof(float) + 1)));

  RouteParams pr{};
  pr.rows = t * hs;
  pr.hs = hs;
  pr.p = p;
  pr.k = static_cast<int>(k);
  pr.top_k = args.top_k;
  pr.u = Data<float>(*args.u);
  pr.pooled = static_cast<const float* const*>(table.get());
  pr.offsets = Data<int32_t>(*args.token_page_offsets);
  pr.token_pages = Data<int32_t>(*args.token_pages);
  pr.scores = static_cast<float*>(scratch.get());
  pr.keep = scratch.get() == nullptr ? nullptr : reinterpret_cast<unsigned char*>(pr.scores + hs * p);
  pr.selected = Data<int32_t>(*args.selected);

  const int64_t blocks = (pr.rows + kThreads - 1) / kThreads;
  MCSERVE_ASSIGN_OR_RETURN(cudaStream_t stream, ::mcserve::kernels::MCSERVE_CUDA_NS::KernelStream());
  MCSERVE_LAUNCH(RouteKernel, static_cast<unsigned>(blocks < kMaxBlocks ? blocks : kMaxBlocks), kThreads, 0,
                 stream)
  (pr);
  return ::mcserve::kernels::MCSERVE_CUDA_NS::TakeLaunchStatus("McRoute");
}

}  // namespace mcserve::kernels::internal::MCSERVE_CUDA_NS
