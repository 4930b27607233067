// One token of one head of the gated delta rule, as the vector kernels take it (gated_delta_avx2.h,
// gated_delta_avx512.h): S [K, V] = α S; u = β (v − Sᵀk); S += k uᵀ; o [V] = Sᵀ q. Plain value.
#pragma once

namespace mcserve::kernels::internal {

struct GatedDeltaToken {
  float* S = nullptr;           // [K, V] the head's memory, updated in place
  const float* q = nullptr;     // [K]
  const float* k = nullptr;     // [K]
  const float* v = nullptr;     // [V]
  float alpha = 1.0f;           // decay
  float beta = 0.0f;            // write strength
  int K = 0, V = 0;             // V ∈ {32, 64, 128}
  float* o = nullptr;           // [V] the read-out
  const float* next = nullptr;  // the next head's memory, whose first `prefetch_bytes` are asked for (or null)
  int prefetch_bytes = 0;
};

}  // namespace mcserve::kernels::internal
