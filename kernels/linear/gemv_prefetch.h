// How far ahead the CPU GEMVs ask for the weight rows they stream, at the batch sizes where they
// prefetch at all (a software prefetch per line): about 8 KB, whatever a block of rows weighs. A fixed
// count of blocks overshot at large k: four blocks of 8 BF16 rows at k = 768 are 48 KB, past the end of
// a 32-row chunk, so a chunk fetched none of its own rows (1.25x slower there; bench/README.md). Any
// thread.
#pragma once

#include <algorithm>
#include <cstdint>

namespace mcserve::kernels::internal {

inline constexpr int64_t kGemvPrefetchBytes = 8192;

// Blocks of `block_bytes` (the weight rows one GEMV block reads) to fetch ahead: at least one.
inline int64_t GemvPrefetchBlocks(int64_t block_bytes) {
  return std::max<int64_t>(1, kGemvPrefetchBytes / std::max<int64_t>(block_bytes, 1));
}

}  // namespace mcserve::kernels::internal
