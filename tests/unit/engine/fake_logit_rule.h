// FakeLogitRule: what FakeModelRunner answers for a row. The arg-max token is a hash of the row's
// history (so a sequence's output does not depend on what shares its batches), skipping the tokens a
// test reserves (EOS); a test may force the k-th generated token instead. Every other logit is lower.
// Not synchronised: its owner locks around changes made while the engine loop runs.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <span>

namespace mcserve::engine::testing {

struct FakeLogitRule {
  int vocab = 1000;
  std::set<int32_t> never_pick;      // tokens never picked as the arg-max (e.g. EOS)
  std::map<int64_t, int32_t> forced;  // k-th generated token (1-based) → that token

  // The arg-max token after `history` of a sequence with a `prompt_size`-token prompt.
  int32_t NextToken(std::span<const int32_t> history, int64_t prompt_size) const {
    const int64_t generated = static_cast<int64_t>(history.size()) - prompt_size + 1;  // 1-based
    if (auto it = forced.find(generated); it != forced.end() && generated >= 1) return it->second;
    uint64_t h = 1469598103934665603ull;
    for (int32_t t : history) h = (h ^ static_cast<uint32_t>(t)) * 1099511628211ull;
    int32_t id = static_cast<int32_t>(h % vocab);
    while (never_pick.count(id)) id = (id + 1) % vocab;
    return id;
  }

  // out [vocab]: the row after `history`, NextToken's logit a clear maximum.
  void Fill(std::span<const int32_t> history, int64_t prompt_size, std::span<float> out) const {
    const int32_t best = NextToken(history, prompt_size);
    for (size_t v = 0; v < out.size(); ++v) out[v] = -static_cast<float>((v * 7919 + history.size()) % 97) / 10.0f;
    out[best] = 5.0f;
  }
};

}  // namespace mcserve::engine::testing
