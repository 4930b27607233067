// 64 columns of y at a time stay in eight AVX2 registers (the kernels' baseline) while the page's K
// rows stream past, so the read is bound by loading S alone. Adding into y in memory row by row, as
// the loop this replaces did, put a store and a dependent reload of y between consecutive rows.
#include "kernels/mc_readout/accumulate_readout.h"

#include <immintrin.h>

#include <cmath>
#include <cstdint>

namespace mcserve::kernels::internal {
namespace {

constexpr int kLanes = 8;  // floats per register

// y[j0 .. j0 + kRegs·kLanes) += Sᵀ(g·q) on those columns, held in kRegs registers.
template <int kRegs>
inline void AccumulateColumns(const float* S, const float* q, float g, int K, int V, int j0, float* y) {
  __m256 acc[kRegs];  // [kRegs × kLanes] columns of y
  for (int b = 0; b < kRegs; ++b) acc[b] = _mm256_loadu_ps(y + j0 + b * kLanes);
  for (int k = 0; k < K; ++k) {
    const __m256 x = _mm256_set1_ps(g * q[k]);
    const float* row = S + static_cast<int64_t>(k) * V + j0;
    for (int b = 0; b < kRegs; ++b) acc[b] = _mm256_fmadd_ps(x, _mm256_loadu_ps(row + b * kLanes), acc[b]);
  }
  for (int b = 0; b < kRegs; ++b) _mm256_storeu_ps(y + j0 + b * kLanes, acc[b]);
}

}  // namespace

void AccumulateReadOut(const float* S, const float* q, float g, int K, int V, float* y) {
  constexpr int kWide = 8;  // registers of the main blocks: 64 columns
  int j0 = 0;
  for (; j0 + kWide * kLanes <= V; j0 += kWide * kLanes) AccumulateColumns<kWide>(S, q, g, K, V, j0, y);
  for (; j0 + kLanes <= V; j0 += kLanes) AccumulateColumns<1>(S, q, g, K, V, j0, y);
  for (; j0 < V; ++j0) {
    float acc = y[j0];
    for (int k = 0; k < K; ++k) acc = std::fma(g * q[k], S[static_cast<int64_t>(k) * V + j0], acc);
    y[j0] = acc;
  }
}

}  // namespace mcserve::kernels::internal
