// CPU element-wise ops: flat loops over all elements, threaded in contiguous chunks when large.
#include <algorithm>
#include <cstdint>

#include "kernels/core/tensor_data.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cpu/vec_math.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/elementwise/elementwise_math.h"

namespace mcserve::kernels::internal {
namespace {

constexpr int64_t kMinParallelElements = 1 << 13;  // a hand-off ~0.5 µs (pool_handoff_bench), 8K SiLUs ~3 µs
constexpr int64_t kChunk = 2048;  // elements per ParallelFor index

// Runs fn(begin, end) over element ranges covering [0, n), threaded when n is large.
template <class Fn>
void ForElements(const Context& ctx, int64_t n, const Fn& fn) {
  if (n < kMinParallelElements || ctx.pool == nullptr) {
    fn(int64_t{0}, n);
    return;
  }
  cpu::ParallelFor(ctx.pool, (n + kChunk - 1) / kChunk, [&](int64_t c0, int64_t c1) {
    fn(c0 * kChunk, std::min(n, c1 * kChunk));
  });
}

// act(x) for 8 lanes, for the kinds with a vector form (kHasVec); elementwise_math::Activate's formulas.
template <ActivationKind kKind>
constexpr bool kHasVec =
    kKind == ActivationKind::kSilu || kKind == ActivationKind::kSigmoid || kKind == ActivationKind::kEluPlusOne;
template <ActivationKind kKind>
__m256 ActivateVec(__m256 x) {
  if constexpr (kKind == ActivationKind::kSilu) {
    return cpu::vec::Silu(x);
  } else if constexpr (kKind == ActivationKind::kSigmoid) {
    return cpu::vec::Sigmoid(x);
  } else {  // elu(x) + 1: x + 1 above 0, else e^x
    const __m256 pos = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GT_OQ);
    return _mm256_blendv_ps(cpu::vec::Exp(x), _mm256_add_ps(x, _mm256_set1_ps(1.0f)), pos);
  }
}

// out [begin, end) = scale · act(x); x, out: flat element arrays (out may alias x).
template <ActivationKind kKind>
void ActivateRange(const float* x, float scale, float* out, int64_t begin, int64_t end) {
  const auto tail = [&](int64_t i) { out[i] = scale * elementwise_math::Activate(kKind, x[i]); };
  if constexpr (kHasVec<kKind>) {
    const __m256 s = _mm256_set1_ps(scale);
    const auto body8 = [&](int64_t i) {
      _mm256_storeu_ps(out + i, _mm256_mul_ps(s, ActivateVec<kKind>(_mm256_loadu_ps(x + i))));
    };
    cpu::vec::ForEach8(begin, end, body8, tail);
  } else {
    for (int64_t i = begin; i < end; ++i) tail(i);
  }
}

}  // namespace

void SigmoidRangeCpu(const float* x, float scale, float* out, int64_t n) {
  ActivateRange<ActivationKind::kSigmoid>(x, scale, out, 0, n);
}

absl::Status ActivationCpu(const Context& ctx, const ActivationArgs& args) {
  const float* x = Data<float>(*args.x);
  float* out = Data<float>(*args.out);
  const float scale = args.scale;
  ForElements(ctx, args.x->numel(), [&](int64_t b, int64_t e) {
    switch (args.kind) {  // one instantiation per kind keeps the inner loop branch-free
      case ActivationKind::kIdentity: return ActivateRange<ActivationKind::kIdentity>(x, scale, out, b, e);
      case ActivationKind::kSilu: return ActivateRange<ActivationKind::kSilu>(x, scale, out, b, e);
      case ActivationKind::kSigmoid: return ActivateRange<ActivationKind::kSigmoid>(x, scale, out, b, e);
      case ActivationKind::kRelu: return ActivateRange<ActivationKind::kRelu>(x, scale, out, b, e);
      case ActivationKind::kEluPlusOne: return ActivateRange<ActivationKind::kEluPlusOne>(x, scale, out, b, e);
      case ActivationKind::kGelu: return ActivateRange<ActivationKind::kGelu>(x, scale, out, b, e);
      case ActivationKind::kGeluTanh: return ActivateRange<ActivationKind::kGeluTanh>(x, scale, out, b, e);
    }
  });
  return absl::OkStatus();
}

absl::Status AddCpu(const Context& ctx, const AddArgs& args) {
  const float* a = Data<float>(*args.a);
  const float* b = Data<float>(*args.b);
  float* out = Data<float>(*args.out);
  ForElements(ctx, args.a->numel(), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = a[i] + b[i];
  });
  return absl::OkStatus();
}

absl::Status SwiGluCpu(const Context& ctx, const SwiGluArgs& args) {
  const float* gate = Data<float>(*args.gate);
  const float* up = Data<float>(*args.up);
  float* out = Data<float>(*args.out);
  ForElements(ctx, args.gate->numel(), [&](int64_t begin, int64_t end) {
    if (args.act == ActivationKind::kSilu) {  // silu(gate) · up, 8 at a time
      cpu::vec::ForEach8(
          begin, end,
          [&](int64_t i) {
            const __m256 g = cpu::vec::Silu(_mm256_loadu_ps(gate + i));
            _mm256_storeu_ps(out + i, _mm256_mul_ps(g, _mm256_loadu_ps(up + i)));
          },
          [&](int64_t i) { out[i] = elementwise_math::SwiGlu(gate[i], up[i]); });
    } else {
      for (int64_t i = begin; i < end; ++i) out[i] = elementwise_math::Activate(args.act, gate[i]) * up[i];
    }
  });
  return absl::OkStatus();
}

}  // namespace mcserve::kernels::internal
