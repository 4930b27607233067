// CPU FeatureMap: threads over (token, head) rows; each row is computed into a scratch buffer, so
// same-shape maps may run in place.
#include <cstring>

#include "kernels/core/tensor_data.h"
#include "kernels/cpu/scratch.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/feature_map/feature_map.h"
#include "kernels/feature_map/feature_map_math.h"

namespace mcserve::kernels::internal {

absl::Status FeatureMapCpu(const Context& ctx, const FeatureMapArgs& args) {
  const Tensor& x = *args.x;
  const int d = static_cast<int>(x.dim(2));
  const int64_t rows = x.dim(0) * x.dim(1);
  const int out_dim = static_cast<int>(FeatureMapOutDim(args.kind, d));
  if (rows == 0 || d == 0) return absl::OkStatus();
  const FeatureMapKind kind = args.kind;
  const bool layer1 = kind == FeatureMapKind::kHadamard || kind == FeatureMapKind::kHedgehog ||
                      kind == FeatureMapKind::kT2R;
  // The op's widened weights [d, d] (transposed) and biases [d], in the thread's op scratch.
  const bool layer2 = kind == FeatureMapKind::kHadamard;
  const size_t dd = static_cast<size_t>(d) * d;
  cpu::ScratchCarver inputs(cpu::OpScratch((layer1 ? 2 * dd : 0) + (layer2 ? dd : 0) + 2 * static_cast<size_t>(d)));
  const std::span<float> w1 = inputs.Take(layer1 ? dd : 0), w2 = inputs.Take(layer2 ? dd : 0);
  const std::span<float> widened = inputs.Take(layer1 ? dd : 0);  // one weight's F32 view at a time
  const std::span<float> b1 = inputs.Take(args.b1 != nullptr ? d : 0), b2 = inputs.Take(args.b2 != nullptr ? d : 0);
  // nn.Linear weights [d (out), d (in)] -> [d (in), d (out)].
  if (layer1) TransposedF32(*args.w1, d, d, widened, w1);
  if (layer2) TransposedF32(*args.w2, d, d, widened, w2);
  const float* b1p = args.b1 != nullptr ? F32View(*args.b1, b1) : nullptr;
  const float* b2p = args.b2 != nullptr ? F32View(*args.b2, b2) : nullptr;
  const float* xd = Data<float>(x);
  float* od = Data<float>(*args.out);

  cpu::ParallelFor(ctx.pool, rows, [&](int64_t begin, int64_t end) {
    cpu::ScratchCarver body(cpu::ThreadScratch(2 * static_cast<size_t>(d) + out_dim));
    const std::span<float> y1 = body.Take(d), y2 = body.Take(d), row = body.Take(out_dim);
    for (int64_t r = begin; r < end; ++r) {
      const float* xr = xd + r * d;
      switch (kind) {
        case FeatureMapKind::kIdentity:
          for (int i = 0; i < d; ++i) row[i] = xr[i];
          break;
        case FeatureMapKind::kElu:
          for (int i = 0; i < d; ++i) row[i] = FeatureMapElu(xr[i]);
          break;
        case FeatureMapKind::kRelu:
          for (int i = 0; i < d; ++i) row[i] = FeatureMapRelu(xr[i]);
          break;
        case FeatureMapKind::kHadamard:
          FeatureMapAffineT(w1.data(), b1p, xr, d, d, y1.data());
          FeatureMapAffineT(w2.data(), b2p, xr, d, d, y2.data());
          for (int i = 0; i < d; ++i) row[i] = y1[i] * y2[i];
          break;
        case FeatureMapKind::kHedgehog:
          FeatureMapAffineT(w1.data(), b1p, xr, d, d, y1.data());
          HedgehogFromAffine(y1.data(), d, row.data());
          break;
        case FeatureMapKind::kT2R:
          FeatureMapAffineT(w1.data(), b1p, xr, d, d, y1.data());
          for (int i = 0; i < d; ++i) row[i] = FeatureMapRelu(y1[i]);
          break;
        case FeatureMapKind::kDpfp:
          DpfpRow(xr, d, kDpfpNu, row.data());
          break;
        case FeatureMapKind::kDpfp3:
          DpfpRow(xr, d, kDpfp3Nu, row.data());
          break;
      }
      std::memcpy(od + r * out_dim, row.data(), out_dim * sizeof(float));
    }
  });
  return absl::OkStatus();
}

}  // namespace mcserve::kernels::internal
