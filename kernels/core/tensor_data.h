// Raw element access for kernels/ only. engine/ and server/ must not include this header
// (a test enforces it): they see tensor data only through explicit host copies.
#pragma once

#include <span>

#if defined(__SSE__) && !defined(__CUDACC__)
#include <xmmintrin.h>
#endif

#include "kernels/core/tensor.h"

namespace mcserve::kernels {

// Pointer to the first element of `t` (on t.device()). Inline: the read-outs ask it of every page a
// decode step lists.
inline void* RawData(const Tensor& t) { return t.data_; }

template <typename T>
T* Data(Tensor& t) {
  return static_cast<T*>(RawData(t));
}
template <typename T>
const T* Data(const Tensor& t) {
  return static_cast<const T*>(RawData(t));
}

// The elements of host tensor `t` as floats: its own data when it is F32, else widened into
// `scratch` (at least numel floats, e.g. cpu::OpScratch).
inline const float* F32View(const Tensor& t, std::span<float> scratch) {
  if (t.dtype() == DType::kF32) return Data<float>(t);
  const uint16_t* bits = Data<uint16_t>(t);
  const int64_t n = t.numel();
  float* out = scratch.data();
  if (t.dtype() == DType::kBF16) {
    for (int64_t i = 0; i < n; ++i) out[i] = Bf16ToF32(bits[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = F16ToF32(bits[i]);
  }
  return out;
}

// out [cols, rows] = the host tensor `t` read as [rows, cols], widened to F32 and transposed;
// `scratch` (rows·cols floats) holds a BF16/F16 tensor's F32 view.
inline void TransposedF32(const Tensor& t, int64_t rows, int64_t cols, std::span<float> scratch,
                          std::span<float> out) {
  const float* src = F32View(t, scratch);
  int64_t r0 = 0;
#if defined(__SSE__) && !defined(__CUDACC__)
  // cols = 4 (a short conv's taps): 4×4 blocks through SSE shuffles, rows 4 at a time.
  for (; cols == 4 && r0 + 4 <= rows; r0 += 4) {
    __m128 a = _mm_loadu_ps(src + r0 * 4), b = _mm_loadu_ps(src + r0 * 4 + 4);
    __m128 c = _mm_loadu_ps(src + r0 * 4 + 8), d = _mm_loadu_ps(src + r0 * 4 + 12);
    _MM_TRANSPOSE4_PS(a, b, c, d);
    float* o = out.data() + r0;
    _mm_storeu_ps(o, a), _mm_storeu_ps(o + rows, b), _mm_storeu_ps(o + 2 * rows, c), _mm_storeu_ps(o + 3 * rows, d);
  }
#endif
  for (int64_t c = 0; c < cols; ++c) {
    for (int64_t r = r0; r < rows; ++r) out[c * rows + r] = src[r * cols + c];
  }
}

// The elements of host I32 tensor `t`, in place.
inline std::span<const int32_t> I32Span(const Tensor& t) {
  return {Data<int32_t>(t), static_cast<size_t>(t.numel())};
}

}  // namespace mcserve::kernels
