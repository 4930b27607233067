#include "tools/eval/perplexity.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace mcserve::tools {
namespace {

absl::Status CheckOptions(const PerplexityOptions& options) {
  if (options.context < 2) {
    return absl::InvalidArgumentError(absl::StrCat("context must be at least 2 tokens, got ", options.context));
  }
  if (options.chunk < 1) return absl::InvalidArgumentError(absl::StrCat("chunk must be positive, got ", options.chunk));
  if (options.bucket < 1) {
    return absl::InvalidArgumentError(absl::StrCat("bucket must be positive, got ", options.bucket));
  }
  if (options.max_windows < 0) {
    return absl::InvalidArgumentError(absl::StrCat("max windows must be >= 0, got ", options.max_windows));
  }
  return absl::OkStatus();
}

// −log softmax(row)[target], in double.
double TokenNll(std::span<const float> row, int32_t target) {
  double max = -std::numeric_limits<double>::infinity();
  for (float x : row) max = std::max(max, static_cast<double>(x));
  double sum = 0;
  for (float x : row) sum += std::exp(static_cast<double>(x) - max);
  return max + std::log(sum) - static_cast<double>(row[target]);
}

std::vector<PositionBucket> EmptyBuckets(int64_t context, int64_t width) {
  std::vector<PositionBucket> buckets;
  for (int64_t begin = 0; begin < context; begin += width) {
    buckets.push_back({.begin = begin, .end = std::min(context, begin + width)});
  }
  return buckets;
}

// Runs one window (its `context` tokens) from a fresh state; adds its NLLs to `result`'s buckets
// and returns the window's NLL sum.
absl::StatusOr<double> RunWindow(const engine::Model& model, engine::StatePool& pool, int slot,
                                 std::span<const int32_t> window, const PerplexityOptions& options,
                                 PerplexityResult& result) {
  MCSERVE_RETURN_IF_ERROR(pool.Reset(slot));
  const int64_t n = static_cast<int64_t>(window.size());
  std::vector<int32_t> inputs(n);  // [BOS] + window[0..n-2]
  inputs[0] = static_cast<int32_t>(model.config().bos_token_id);
  std::copy(window.begin(), window.end() - 1, inputs.begin() + 1);
  double window_nll = 0;
  for (int64_t begin = 0; begin < n; begin += options.chunk) {
    const int64_t len = std::min(options.chunk, n - begin);
    const engine::SequenceChunk chunk{.slot = slot, .tokens = std::span<const int32_t>(inputs).subspan(begin, len),
                                      .all_logits = true};
    MCSERVE_ASSIGN_OR_RETURN(kernels::Tensor logits, model.Forward({&chunk, 1}, pool));
    MCSERVE_ASSIGN_OR_RETURN(std::vector<float> host, logits.ToHostF32());
    const int64_t vocab = logits.dim(-1);
    for (int64_t r = 0; r < len; ++r) {
      const int64_t position = begin + r;
      if (window[position] < 0 || window[position] >= vocab) {
        return absl::InvalidArgumentError(absl::StrCat("token id ", window[position], " is outside the vocabulary"));
      }
      const double nll = TokenNll(std::span<const float>(host).subspan(r * vocab, vocab), window[position]);
      PositionBucket& bucket = result.buckets[position / options.bucket];
      bucket.nll_sum += nll;
      bucket.count += 1;
      window_nll += nll;
    }
  }
  return window_nll;
}

}  // namespace

absl::StatusOr<PerplexityResult> EvaluatePerplexity(const engine::Model& model, engine::StatePool& pool, int slot,
                                                    std::span<const int32_t> stream, const PerplexityOptions& options) {
  MCSERVE_RETURN_IF_ERROR(CheckOptions(options));
  PerplexityResult result;
  result.stream_tokens = static_cast<int64_t>(stream.size());
  result.windows_available = result.stream_tokens / options.context;
  if (result.windows_available == 0) {
    return absl::InvalidArgumentError(absl::StrCat("the text has ", result.stream_tokens,
                                                   " tokens, fewer than one window of ", options.context));
  }
  result.windows = options.max_windows > 0 ? std::min(options.max_windows, result.windows_available)
                                           : result.windows_available;
  result.buckets = EmptyBuckets(options.context, options.bucket);
  for (int64_t w = 0; w < result.windows; ++w) {
    const auto window = stream.subspan(w * options.context, options.context);
    MCSERVE_ASSIGN_OR_RETURN(double window_nll, RunWindow(model, pool, slot, window, options, result));
    result.nll_sum += window_nll;
    if (options.on_window) options.on_window(w, window_nll / static_cast<double>(options.context));
  }
  result.predictions = result.windows * options.context;
  result.mean_nll = result.nll_sum / static_cast<double>(result.predictions);
  result.perplexity = std::exp(result.mean_nll);
  return result;
}

}  // namespace mcserve::tools
