// AVX2+FMA forms of the per-element transcendentals of the *_math.h headers, 8 floats at a time, for
// the CPU kernels' vector loop bodies (the *_math.h scalars stay the definition and do the tails).
// Exp is within ~1 ulp of e^x over the whole float range (overflow → +inf, underflow → 0, through
// subnormals), Log1p within 1 ulp (musl's log1pf algorithm); the rest are the scalars' formulas on
// them. tests/unit/kernels/vec_math_test.cc pins the bounds. Pure functions: any thread.
#pragma once

#if !defined(__AVX2__) || !defined(__FMA__)
#error "kernels/cpu/vec_math.h needs AVX2 and FMA (compile with -march=x86-64-v3)"
#endif

#include <immintrin.h>

#include <cstdint>

namespace mcserve::kernels::cpu::vec {

// The lanes of `x` that are NaN as an all-ones mask.
inline __m256 IsNan(__m256 x) { return _mm256_cmp_ps(x, x, _CMP_UNORD_Q); }

// e^x per lane, ≤ 1.01 ulp from the exact value (measured); +inf above ~88.72, 0 below ~−103.97, NaN → NaN.
inline __m256 Exp(__m256 x) {
  // Outside [−104, 89] the result is already 0 or +inf; clamping keeps n a small integer.
  const __m256 xc = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-104.0f)), _mm256_set1_ps(89.0f));
  // x = n·ln2 + r, |r| ≤ ln2/2 (+ rounding); ln2 split hi + lo so n·ln2_hi is exact.
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), xc);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  // e^r = 1 + r + r²·P(r) (Cephes expf's minimax polynomial), Horner with FMA.
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r);
  p = _mm256_add_ps(p, _mm256_set1_ps(1.0f));
  // × 2^n as 2^(n/2) · 2^(n − n/2): both factors are normal floats for n in [−150, 128], so the
  // product overflows to inf and rounds into subnormals correctly, with one rounding.
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i n1 = _mm256_srai_epi32(ni, 1);
  const __m256i n2 = _mm256_sub_epi32(ni, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  const __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
  return _mm256_blendv_ps(y, x, IsNan(x));
}

// log(1 + x) per lane for x ≥ −1 (−1 → −inf, +inf → +inf, NaN → NaN, below −1 → NaN); musl's log1pf.
inline __m256 Log1p(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.0f);
  // u = 1 + x = 2^k · m, m in [√2/2, √2); c ≈ log(1 + x) − log(u), the rounding of u.
  const __m256 u = _mm256_add_ps(one, x);
  __m256i iu = _mm256_add_epi32(_mm256_castps_si256(u), _mm256_set1_epi32(0x3f800000 - 0x3f3504f3));
  const __m256i ki = _mm256_sub_epi32(_mm256_srli_epi32(iu, 23), _mm256_set1_epi32(0x7f));
  iu = _mm256_add_epi32(_mm256_and_si256(iu, _mm256_set1_epi32(0x007fffff)), _mm256_set1_epi32(0x3f3504f3));
  const __m256 k = _mm256_cvtepi32_ps(ki);
  const __m256 c_big = _mm256_sub_ps(one, _mm256_sub_ps(u, x));    // k ≥ 2: u − x is exact
  const __m256 c_small = _mm256_sub_ps(x, _mm256_sub_ps(u, one));  // k < 2: u − 1 is exact
  __m256 c = _mm256_blendv_ps(c_small, c_big, _mm256_cmp_ps(k, _mm256_set1_ps(2.0f), _CMP_GE_OQ));
  c = _mm256_div_ps(c, u);
  c = _mm256_and_ps(c, _mm256_cmp_ps(k, _mm256_set1_ps(25.0f), _CMP_LT_OQ));  // x ≫ 1: no correction
  __m256 f = _mm256_sub_ps(_mm256_castsi256_ps(iu), one);
  // 1 + x already in [√2/2, √2) (k = 0): f = x exactly and no correction.
  const __m256 k0 = _mm256_cmp_ps(k, _mm256_setzero_ps(), _CMP_EQ_OQ);
  f = _mm256_blendv_ps(f, x, k0);
  c = _mm256_andnot_ps(k0, c);
  // log(1 + f) = 2 atanh(s), s = f / (2 + f), as f − f²/2 + s (f²/2 + R(s²)).
  const __m256 s = _mm256_div_ps(f, _mm256_add_ps(_mm256_set1_ps(2.0f), f));
  const __m256 z = _mm256_mul_ps(s, s);
  const __m256 w = _mm256_mul_ps(z, z);
  const __m256 t1 =
      _mm256_mul_ps(w, _mm256_fmadd_ps(w, _mm256_set1_ps(0.24279078841f), _mm256_set1_ps(0.40000972152f)));
  const __m256 t2 =
      _mm256_mul_ps(z, _mm256_fmadd_ps(w, _mm256_set1_ps(0.28498786688f), _mm256_set1_ps(0.66666662693f)));
  const __m256 hfsq = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), f), f);
  const __m256 lo = _mm256_fmadd_ps(k, _mm256_set1_ps(9.0580006145e-06f), c);
  __m256 y = _mm256_fmadd_ps(s, _mm256_add_ps(hfsq, _mm256_add_ps(t2, t1)), lo);
  y = _mm256_add_ps(_mm256_sub_ps(y, hfsq), f);
  y = _mm256_fmadd_ps(k, _mm256_set1_ps(6.9313812256e-01f), y);
  // Ends of the domain: −1 → −inf, below → NaN, +inf → +inf (NaN stays NaN through the blends).
  const __m256 neg_one = _mm256_set1_ps(-1.0f), inf = _mm256_set1_ps(__builtin_huge_valf());
  y = _mm256_blendv_ps(y, _mm256_set1_ps(__builtin_nanf("")), _mm256_cmp_ps(x, neg_one, _CMP_LT_OQ));
  y = _mm256_blendv_ps(y, _mm256_sub_ps(_mm256_setzero_ps(), inf), _mm256_cmp_ps(x, neg_one, _CMP_EQ_OQ));
  y = _mm256_blendv_ps(y, inf, _mm256_cmp_ps(x, inf, _CMP_EQ_OQ));
  return _mm256_blendv_ps(y, x, IsNan(x));
}

// 1 / (1 + e^−x), as elementwise_math::Sigmoid (saturates to 0 and 1).
inline __m256 Sigmoid(__m256 x) {
  const __m256 e = Exp(_mm256_sub_ps(_mm256_setzero_ps(), x));
  return _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

// x · sigmoid(x), as elementwise_math::Silu and rms_norm_math::Swish.
inline __m256 Silu(__m256 x) { return _mm256_mul_ps(x, Sigmoid(x)); }

// x / (1 + e^−x), as ShortConvSilu (the same function, one rounding fewer than Silu).
inline __m256 SiluDiv(__m256 x) {
  const __m256 e = Exp(_mm256_sub_ps(_mm256_setzero_ps(), x));
  return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

// log(1 + e^x), x above 20 → x, as gate_math::Softplus (torch's threshold 20).
inline __m256 Softplus(__m256 x) {
  const __m256 y = Log1p(Exp(x));
  return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, _mm256_set1_ps(20.0f), _CMP_GT_OQ));
}

// log(sigmoid(x)) = min(x, 0) − log(1 + e^−|x|), as gate_math::LogSigmoid.
inline __m256 LogSigmoid(__m256 x) {
  const __m256 abs = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x);
  const __m256 l = Log1p(Exp(_mm256_sub_ps(_mm256_setzero_ps(), abs)));
  return _mm256_sub_ps(_mm256_min_ps(x, _mm256_setzero_ps()), l);
}

// Runs body8(i) for i = begin, begin + 8, … while 8 elements remain, then tail(i) for each of the
// rest: the vector form of a loop over [begin, end) with its scalar *_math.h form on the tail.
template <class Body8, class Tail>
inline void ForEach8(int64_t begin, int64_t end, const Body8& body8, const Tail& tail) {
  int64_t i = begin;
  for (; i + 8 <= end; i += 8) body8(i);
  for (; i < end; ++i) tail(i);
}

}  // namespace mcserve::kernels::cpu::vec
