// The transpose of a read-out's per-token page lists (CSR offsets [T + 1] into token_pages [E]):
// for each page, the entries that read it, sorted by token. The CPU read-outs (McReadout,
// DeepMcReadout) batch one page's readers into one GEMM with it. Any thread; no shared state.
#pragma once

#include <cstdint>
#include <vector>

namespace mcserve::kernels::internal {

struct TokenPageIndex {
  std::vector<int64_t> page_begin;  // [pages + 1]: page i's entries are [page_begin[i], page_begin[i+1])
  std::vector<int32_t> entry;       // [E]: the entry's index into token_pages
  std::vector<int32_t> token;       // [E]: the token that reads it (ascending within a page)
  std::vector<int64_t> fill;        // [pages]: build scratch, kept so a reused index allocates nothing
};

// Builds the index of `tokens` tokens' lists over `num_pages` pages (reusing `index`'s capacity).
inline void BuildTokenPageIndex(const int32_t* offsets, int64_t tokens, const int32_t* token_pages, int64_t entries,
                                int64_t num_pages, TokenPageIndex& index) {
  index.page_begin.assign(num_pages + 1, 0);
  for (int64_t x = 0; x < entries; ++x) ++index.page_begin[token_pages[x] + 1];
  for (int64_t i = 0; i < num_pages; ++i) index.page_begin[i + 1] += index.page_begin[i];
  index.entry.resize(entries);
  index.token.resize(entries);
  std::vector<int64_t>& fill = index.fill;
  fill.assign(index.page_begin.begin(), index.page_begin.end() - 1);
  for (int64_t t = 0; t < tokens; ++t) {  // tokens ascending, so each page's entries are sorted by token
    for (int32_t x = offsets[t]; x < offsets[t + 1]; ++x) {
      const int64_t s = fill[token_pages[x]]++;
      index.entry[s] = x;
      index.token[s] = static_cast<int32_t>(t);
    }
  }
}

}  // namespace mcserve::kernels::internal
