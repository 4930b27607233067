// ArmtConfig: the `armt` family's fields (docs/model-format.md, `armt`) beyond the shared skeleton
// (n_embd → hidden_size, n_layer → num_hidden_layers, n_inner → intermediate_size, vocab_size,
// layer_norm_epsilon → norm_eps; the head is tied to wte). Immutable after load.
#pragma once

#include <cstdint>
#include <optional>

namespace mcserve::engine {

struct ArmtConfig {
  int64_t n_positions = 1024;      // rows of wpe (+ M with wrap_pos)
  int64_t num_heads = 12;          // GPT-2 attention heads
  int64_t head_dim = 64;           // n_embd / n_head
  int64_t segment_size = 0;        // S: content tokens per segment
  int64_t num_mem_tokens = 0;      // M: memory tokens appended at each close
  int64_t d_mem = 0;               // P: width of W_mq, W_mk
  int64_t feat_dim = 0;            // F = 6P (DPFP-3)
  std::optional<bool> wrap_pos;    // null: decided by wpe's row count at load
  bool correction = true;          // γ-correction (false: γ = 1)
};

}  // namespace mcserve::engine
