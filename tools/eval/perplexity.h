// Streamed perplexity of a token stream through the engine (mcserve-eval perplexity).
//
// Windows follow tools/train/windows.py, so `--context 256` reproduces the trainer's held-out
// perplexity: the stream (the text's tokens, no BOS) is cut into consecutive non-overlapping
// windows w of `context` tokens (the remainder shorter than a window is dropped); each window runs
// from a fresh state as [BOS] + w[0..context-2] and is scored on predicting every w[p], p =
// 0..context-1 (w[0] from BOS alone). perplexity = exp(mean NLL) over all scored tokens.
// Each window is one engine request ([BOS] + w, one token generated) with prompt_logprobs: the
// engine's runner scores every prompt token from its chunk's all-token logits, so memory holds one
// chunk's logits [chunk, vocab] (the engine's max_batch_tokens), never a whole window's. Caller's
// thread; one call at a time per engine.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/serving/engine.h"

namespace mcserve::tools {

struct PerplexityOptions {
  int64_t context = 256;     // tokens per window (each scored), >= 2
  int64_t chunk = 256;       // tokens per forward step, >= 1: the engine's max_batch_tokens (reported)
  int64_t max_windows = 0;   // evaluate at most this many windows (the first ones); 0 = all
  int64_t bucket = 256;      // width of the position buckets, >= 1
  // Called after each window with its index and its mean NLL (e.g. for progress output).
  std::function<void(int64_t window, double mean_nll)> on_window;
};

// Summed NLL of the predictions of tokens at window positions [begin, end).
struct PositionBucket {
  int64_t begin = 0;
  int64_t end = 0;
  double nll_sum = 0;
  int64_t count = 0;  // predictions in this bucket over all windows
};

struct PerplexityResult {
  int64_t stream_tokens = 0;      // tokens of the text (without BOS)
  int64_t windows_available = 0;  // whole windows in the stream
  int64_t windows = 0;            // windows evaluated
  int64_t predictions = 0;        // scored tokens = windows · context
  double nll_sum = 0;             // nats
  double mean_nll = 0;            // nats per token
  double perplexity = 0;          // exp(mean_nll)
  std::vector<PositionBucket> buckets;  // ⌈context / bucket⌉ buckets, by position in the window
};

// Runs the windows of `stream` through `engine` (one request each, prefixed with `bos`; the engine
// must not resume them from a prefix cache) and returns the perplexity with its per-position
// buckets. Fewer tokens than one window, or bad options → InvalidArgument.
absl::StatusOr<PerplexityResult> EvaluatePerplexity(engine::Engine& engine, int32_t bos,
                                                    std::span<const int32_t> stream, const PerplexityOptions& options);

}  // namespace mcserve::tools
