// GamConfig: the `gam` family's fields (docs/model-format.md, `gam`) beyond the shared skeleton
// (n_embed → hidden_size, n_layer → num_hidden_layers, vocab_size, layer_norm_eps → norm_eps; the
// FFN is 4·n_embed wide). Immutable after load.
#pragma once

#include <cstdint>

namespace mcserve::engine {

struct GamConfig {
  int64_t block_size = 256;         // rows of the learned position table
  int64_t num_memory_slots = 512;   // Ms: rows of each layer's memory bank
  int64_t conv_kernel_size = 3;     // k: depthwise causal conv taps (state: the last k−1 LN1 outputs)
  bool clamp_positions = false;     // position_overflow: clamp (else a position ≥ block_size is an error)
  int64_t overflow_position = 255;  // p(t) for t ≥ block_size under clamp
  int64_t receptive_tokens = 12;    // n_layer·(k−1): the tokens that determine the state
};

}  // namespace mcserve::engine
