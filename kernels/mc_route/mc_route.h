// McRoute: the Sparse Selective Caching router on its own (docs/memory-caching.md). For token t and
// state head h it scores every page of the token's list by z_i = ⟨u_t,h, pooled_key_i,h⟩ and keeps
// the top_k exactly as McReadout's kTopKSoftmax does (higher score first, ties to the lower list
// position, n ≤ top_k keeps all), so that the serving engine can stage only the selected pages
// before the read-out: McReadout run afterwards on each token's list reduced to (a superset of) the
// selected pages, in the original order, keeps the same pages.
// Any thread; calls sharing a Context.pool must not overlap.
#pragma once

#include <span>

#include "absl/status/status.h"
#include "kernels/core/context.h"
#include "kernels/core/tensor.h"

namespace mcserve::kernels {

struct McRouteArgs {
  int top_k = 2;
  const Tensor* u = nullptr;                   // [T, Hs, K] F32: gate input per state head
  std::span<const Tensor* const> pooled_keys;  // [num_pages] each [Hs, K] F32
  const Tensor* token_page_offsets = nullptr;  // [T + 1] I32 CSR offsets into token_pages
  const Tensor* token_pages = nullptr;         // [P] I32 indices into pooled_keys
  Tensor* selected = nullptr;                  // [T, Hs, top_k] I32 out: for each (token, head) the page
                                               // indices (values of token_pages) it keeps, in list order,
                                               // padded with -1 when the list has fewer than top_k entries
};

// Validates every tensor (dtype, shape, device = ctx.device, CSR values), then routes on ctx.device.
absl::Status McRoute(const Context& ctx, const McRouteArgs& args);

namespace internal {
absl::Status McRouteCpu(const Context& ctx, const McRouteArgs& args);
namespace cuda {  // mc_route_cuda.cu compiled by nvcc
absl::Status McRouteCuda(const Context& ctx, const McRouteArgs& args);
}  // namespace cuda
namespace cuda_emu {  // the same source on the CUDA emulator
absl::Status McRouteCuda(const Context& ctx, const McRouteArgs& args);
}  // namespace cuda_emu
}  // namespace internal

}  // namespace mcserve::kernels
