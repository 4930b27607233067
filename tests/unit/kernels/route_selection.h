// Test helper shared by the McReadout and DeepMcReadout tests: per-token page lists reduced to what
// McRoute selected, as the serving engine stages them (ssc_routed.cc).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace mcserve::kernels {

// Each token's list (lists [T]) reduced to the pages selected for any of its `heads` heads (selected
// [T, heads, top_k], −1 padded), in the original list order.
inline std::vector<std::vector<int32_t>> ReduceListsToSelection(const std::vector<std::vector<int32_t>>& lists,
                                                                const std::vector<int32_t>& selected, int64_t heads,
                                                                int top_k) {
  std::vector<std::vector<int32_t>> reduced(lists.size());
  for (size_t t = 0; t < lists.size(); ++t) {
    const auto first = selected.begin() + static_cast<int64_t>(t) * heads * top_k, last = first + heads * top_k;
    for (int32_t p : lists[t]) {
      if (std::find(first, last, p) != last) reduced[t].push_back(p);
    }
  }
  return reduced;
}

}  // namespace mcserve::kernels
