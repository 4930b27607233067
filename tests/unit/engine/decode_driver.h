// Drives batched decode steps of a loaded model for the allocation tests: each slot's prompt first,
// then one token per slot per step, the token buffers reused so that the driver allocates nothing.
// Test thread only.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/runner/model.h"
#include "gtest/gtest.h"

namespace mcserve::testing {

class DecodeDriver {
 public:
  // `batch` slots of `pool`, each with a `prompt_len`-token prompt (any in-vocabulary pattern).
  DecodeDriver(const engine::Model& model, engine::StatePool& pool, int batch, int prompt_len)
      : model_(model), pool_(pool), tokens_(batch), chunks_(batch) {
    for (int b = 0; b < batch; ++b) {
      for (int s = 0; s < prompt_len; ++s) tokens_[b].push_back(TokenAt(b, s));
      chunks_[b] = {.slot = b, .tokens = tokens_[b]};
    }
  }

  // One Model::Forward of the current chunks (the prompts the first time); each slot's next chunk is
  // then one token that depends on `s`. The logits are not read.
  void Step(int s) {
    auto logits = model_.Forward(chunks_, pool_);
    ASSERT_TRUE(logits.ok()) << logits.status();
    for (size_t b = 0; b < chunks_.size(); ++b) {
      tokens_[b].assign(1, TokenAt(static_cast<int>(b), s));  // capacity kept: no allocation
      chunks_[b].tokens = tokens_[b];
      chunks_[b].learn = false;
    }
  }

 private:
  int32_t TokenAt(int b, int s) const {
    return static_cast<int32_t>((7 * b + 13 * s + 3) % model_.config().vocab_size);
  }

  const engine::Model& model_;
  engine::StatePool& pool_;
  std::vector<std::vector<int32_t>> tokens_;
  std::vector<engine::SequenceChunk> chunks_;
};

}  // namespace mcserve::testing
