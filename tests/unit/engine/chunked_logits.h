// ChunkedLogits: a prompt fed to Model::Forward chunk by chunk through one slot, every token's logits
// concatenated (the chunked ≡ token-by-token checks of the hope tests). Test helper; one thread.
#pragma once

#include <algorithm>
#include <functional>
#include <vector>

#include "engine/runner/model.h"
#include "gtest/gtest.h"

namespace mcserve::testing {

// Logits [ids.size(), vocab] of every token of `ids` fed in chunks of `chunk` through slot `slot` of
// `pool`; each chunk's learn flag is `learn(begin)`. A failed Forward is a test failure and returns {}.
inline std::vector<float> ChunkedLogits(const engine::Model& model, engine::StatePool& pool, int slot,
                                        const std::vector<int32_t>& ids, int chunk,
                                        const std::function<bool(size_t)>& learn = [](size_t) { return true; }) {
  std::vector<float> all;
  for (size_t begin = 0; begin < ids.size(); begin += chunk) {
    engine::SequenceChunk c{.slot = slot,
                            .tokens = {ids.data() + begin, std::min<size_t>(chunk, ids.size() - begin)},
                            .all_logits = true,
                            .learn = learn(begin)};
    auto logits = model.Forward({&c, 1}, pool);
    EXPECT_TRUE(logits.ok()) << logits.status();
    if (!logits.ok()) return {};
    auto host = logits->ToHostF32();
    all.insert(all.end(), host->begin(), host->end());
  }
  return all;
}

}  // namespace mcserve::testing
