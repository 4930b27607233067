// The row gather of GatherRows shared by the CPU and CUDA backends: one table row widened to F32.
#pragma once

#include <cstdint>

#include "kernels/core/dtype.h"

namespace mcserve::kernels::gather_rows_math {

// dst[i] = src[i] for i < n; src: [n] F32 row.
MCSERVE_HD void CopyRowF32(const float* src, int64_t n, float* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
}

// dst[i] = bf16(src[i]); src: [n] BF16 bits.
MCSERVE_HD void WidenRowBf16(const uint16_t* src, int64_t n, float* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = Bf16ToF32(src[i]);
}

// dst[i] = f16(src[i]); src: [n] F16 bits.
MCSERVE_HD void WidenRowF16(const uint16_t* src, int64_t n, float* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = F16ToF32(src[i]);
}

// True when `id` names a row of a table with `vocab` rows.
MCSERVE_HD bool IdInRange(int32_t id, int64_t vocab) { return id >= 0 && id < vocab; }

}  // namespace mcserve::kernels::gather_rows_math
