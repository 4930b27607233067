// Prompt log-probabilities (vLLM's `prompt_logprobs`): the score of a token under one row of logits.
// Used by the runner for the rows inside a chunk and by the engine across chunks. Any thread.
#pragma once

#include <cstdint>
#include <span>

namespace mcserve::engine {

// log softmax(row)[token], computed in double (row: [vocab] logits; token in [0, vocab)).
float TokenLogProb(std::span<const float> row, int32_t token);

}  // namespace mcserve::engine
