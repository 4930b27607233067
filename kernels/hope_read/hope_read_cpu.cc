// CPU HopeRead: a loop over (row, head) with hope_read_math.h.
#include "kernels/core/tensor_data.h"
#include "kernels/hope_read/hope_read.h"
#include "kernels/hope_read/hope_read_math.h"

namespace mcserve::kernels::internal {

absl::Status HopeReadCpu(const Context&, const HopeReadCall& call) {
  const HopeReadArgs& a = call.args;
  const int64_t n = a.q_pre->dim(0), heads = a.q_pre->dim(1), d = a.q_pre->dim(2);
  const int64_t k = a.query ? a.q_conv->dim(2) : 1, e = a.expansion * d, pm = a.memory->dim(2), work = 3 * d + 2 * e;
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t row = (r * heads + h) * d;
      hope_read_math::ReadHead({.q_pre = Data<float>(*a.q_pre) + row,
                                .window = a.window ? Data<float>(*a.window) + r * (k - 1) * heads * d + h * d : nullptr,
                                .conv = a.query ? Data<float>(*a.q_conv) + h * d * k : nullptr,
                                .w = Data<float>(*a.memory) + (r * heads + h) * pm + a.weights_offset,
                                .dy = a.dy ? Data<float>(*a.dy) + row : nullptr,
                                .work = Data<float>(*call.work) + (r * heads + h) * work,
                                .out = Data<float>(*a.out) + row, .stride = heads * d, .d = static_cast<int>(d),
                                .e = static_cast<int>(e), .k = static_cast<int>(k), .act = a.activation,
                                .query = a.query});
    }
  }
  return absl::OkStatus();
}

}  // namespace mcserve::kernels::internal
