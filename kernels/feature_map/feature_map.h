// FeatureMap: fla's linear-attention feature maps φ, applied per head (fla/modules/feature_map.py).
// Any thread; calls sharing a Context.pool must not overlap.
#pragma once

#include "absl/status/status.h"
#include "kernels/core/context.h"
#include "kernels/core/tensor.h"

namespace mcserve::kernels {

enum class FeatureMapKind {
  kIdentity,
  kElu,                 // elu(x) + 1
  kRelu,                // relu(x)
  kHadamard,            // fla "elementwise_product": (W1 x + b1) ⊙ (W2 x + b2)
  kHedgehog,            // softmax over [2y, −2y], y = W x + b (fla HedgehogFeatureMap), out dim 2·d
  kT2R,                 // relu(W x (+ b)); fla's T2RFeatureMap has no bias (bias=False)
  kDpfp,                // fla DPFPFeatureMap, ν = 4, out dim 2·ν·d: p = [relu(x), relu(−x)],
                        // out[(j−1)·2d + i] = p[i]·p[(i−j) mod 2d] for j = 1..ν
  kDpfp3,               // the same DPFP with ν = 3 (ARMT's associative memory), out dim 6·d
};

// Output feature dimension of `kind` for an input head dim `d`.
int64_t FeatureMapOutDim(FeatureMapKind kind, int64_t d);

struct FeatureMapArgs {
  FeatureMapKind kind = FeatureMapKind::kIdentity;
  const Tensor* x = nullptr;   // [T, heads, d] F32
  const Tensor* w1 = nullptr;  // kHadamard/kT2R/kHedgehog: [d, d]   (nn.Linear layout)
  const Tensor* b1 = nullptr;  // optional [d]
  const Tensor* w2 = nullptr;  // kHadamard: [d, d]
  const Tensor* b2 = nullptr;  // kHadamard: optional [d]
  Tensor* out = nullptr;       // [T, heads, FeatureMapOutDim(kind, d)] F32
};

absl::Status FeatureMap(const Context& ctx, const FeatureMapArgs& args);

namespace internal {
absl::Status FeatureMapCpu(const Context& ctx, const FeatureMapArgs& args);
namespace cuda {  // feature_map_cuda.cu compiled by nvcc
absl::Status FeatureMapCuda(const Context& ctx, const FeatureMapArgs& args);
}  // namespace cuda
namespace cuda_emu {  // the same source on the CUDA emulator
absl::Status FeatureMapCuda(const Context& ctx, const FeatureMapArgs& args);
}  // namespace cuda_emu
}  // namespace internal

}  // namespace mcserve::kernels
