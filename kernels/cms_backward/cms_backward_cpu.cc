// CPU CMS backward ops: loops over rows / elements with cms_backward_math.h (single-threaded: the
// tensors are one token's rows).
#include "kernels/cms_backward/cms_backward.h"
#include "kernels/cms_backward/cms_backward_math.h"
#include "kernels/core/tensor_data.h"

namespace mcserve::kernels::internal {

namespace bm = cms_backward_math;

absl::Status RmsNormBackwardCpu(const Context&, const RmsNormBackwardArgs& a) {
  const int64_t rows = a.x->dim(0), n = a.x->dim(1);
  for (int64_t r = 0; r < rows; ++r) {
    bm::RmsNormBackwardRow(Data<float>(*a.x) + r * n, Data<float>(*a.weight), Data<float>(*a.dy) + r * n, n, a.eps,
                           Data<float>(*a.dx) + r * n);
  }
  return absl::OkStatus();
}

absl::Status XentGradCpu(const Context&, const XentGradArgs& a) {
  const int64_t rows = a.logits->dim(0), v = a.logits->dim(1);
  for (int64_t r = 0; r < rows; ++r) {
    bm::XentGradRow(Data<float>(*a.logits) + r * v, Data<int32_t>(*a.targets)[r], v, Data<float>(*a.grad) + r * v);
  }
  return absl::OkStatus();
}

absl::Status GluBackwardCpu(const Context&, const GluBackwardArgs& a) {
  const int64_t n = a.up->numel();
  const float *up = Data<float>(*a.up), *dm = Data<float>(*a.dm);
  float* dup = Data<float>(*a.dup);
  if (a.gate == nullptr) {
    for (int64_t i = 0; i < n; ++i) dup[i] = bm::GeluBackward(up[i], dm[i]);
    return absl::OkStatus();
  }
  const float* gate = Data<float>(*a.gate);
  float* dgate = Data<float>(*a.dgate);
  for (int64_t i = 0; i < n; ++i) bm::SwiGluBackward(gate[i], up[i], dm[i], dgate + i, dup + i);
  return absl::OkStatus();
}

absl::Status TransposeCpu(const Context&, const TransposeArgs& a) {
  const int64_t rows = a.x->dim(0), cols = a.x->dim(1);
  const float* x = Data<float>(*a.x);
  float* out = Data<float>(*a.out);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) out[c * rows + r] = x[r * cols + c];
  }
  return absl::OkStatus();
}

}  // namespace mcserve::kernels::internal
