#include "kernels/linear/gemm_transpose.h"

#include <immintrin.h>

#include <algorithm>

namespace mcserve::kernels::internal {
namespace {

// dst[c, i] = src[i, c] for an 8×8 block: src rows at stride lds, dst rows at stride ldd (AVX2 shuffles).
inline void Transpose8x8(const float* src, int64_t lds, float* dst, int64_t ldd) {
  __m256 r[8], t[8], u[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * lds);
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int c = 0; c < 4; ++c) {
    _mm256_storeu_ps(dst + c * ldd, _mm256_permute2f128_ps(u[c], u[c + 4], 0x20));
    _mm256_storeu_ps(dst + (c + 4) * ldd, _mm256_permute2f128_ps(u[c], u[c + 4], 0x31));
  }
}

}  // namespace

int64_t GemmTransposePieces(int64_t k) { return (k + 7) / 8; }

void TransposeForGemm(const float* x, int64_t m, int64_t k, float* xt, int64_t begin, int64_t end) {
  const int64_t lanes = GemmLanes(m);
  const int64_t m8 = m & ~int64_t{7}, k8 = k & ~int64_t{7};
  const int64_t c0 = begin * 8, c1 = std::min(k, end * 8);  // this range's columns
  for (int64_t i = 0; i < m8; i += 8) {
    for (int64_t c = c0; c < std::min(c1, k8); c += 8) Transpose8x8(x + i * k + c, k, xt + c * lanes + i, lanes);
  }
  for (int64_t c = c0; c < c1; ++c) {
    for (int64_t i = c < k8 ? m8 : 0; i < m; ++i) xt[c * lanes + i] = x[i * k + c];
    for (int64_t i = m; i < lanes; ++i) xt[c * lanes + i] = 0.0f;
  }
}

void TransposeForGemm(const float* x, int64_t m, int64_t k, float* xt) {
  TransposeForGemm(x, m, k, xt, 0, GemmTransposePieces(k));
}

}  // namespace mcserve::kernels::internal
