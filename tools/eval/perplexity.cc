#include "tools/eval/perplexity.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tools/eval/engine_request.h"

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

std::vector<PositionBucket> EmptyBuckets(int64_t context, int64_t width) {
  std::vector<PositionBucket> buckets;
  for (int64_t begin = 0; begin < context; begin += width) {
    buckets.push_back({.begin = begin, .end = std::min(context, begin + width)});
  }
  return buckets;
}

// Runs one window (its `context` tokens) as one request from a fresh state; adds its NLLs to
// `result`'s buckets and returns the window's NLL sum.
absl::StatusOr<double> RunWindow(engine::Engine& engine, int32_t bos, std::span<const int32_t> window,
                                 const PerplexityOptions& options, PerplexityResult& result) {
  engine::RequestSpec spec;
  spec.prompt.push_back(bos);  // [BOS] + window: prompt[p + 1] = window[p]
  spec.prompt.insert(spec.prompt.end(), window.begin(), window.end());
  spec.prompt_logprobs = true;
  spec.sampling.temperature = 0;
  spec.stop.max_tokens = 1;  // the engine generates at least one token; it is not scored
  spec.stop.ignore_eos = true;
  MCSERVE_ASSIGN_OR_RETURN(Completion c, Complete(engine, std::move(spec)));
  if (c.cached_prompt_tokens != 0 || c.prompt_logprobs.size() != window.size()) {
    return absl::InternalError(absl::StrCat("the engine scored ", c.prompt_logprobs.size(), " of a window's ",
                                            window.size(), " tokens (", c.cached_prompt_tokens, " cached)"));
  }
  double window_nll = 0;
  for (size_t position = 0; position < window.size(); ++position) {
    const double nll = -static_cast<double>(c.prompt_logprobs[position]);
    PositionBucket& bucket = result.buckets[static_cast<int64_t>(position) / options.bucket];
    bucket.nll_sum += nll;
    bucket.count += 1;
    window_nll += nll;
  }
  return window_nll;
}

}  // namespace

absl::StatusOr<PerplexityResult> EvaluatePerplexity(engine::Engine& engine, int32_t bos,
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
    MCSERVE_ASSIGN_OR_RETURN(double window_nll, RunWindow(engine, bos, window, options, result));
    result.nll_sum += window_nll;
    if (options.on_window) options.on_window(w, window_nll / static_cast<double>(options.context));
  }
  result.predictions = result.windows * options.context;
  result.mean_nll = result.nll_sum / static_cast<double>(result.predictions);
  result.perplexity = std::exp(result.mean_nll);
  return result;
}

}  // namespace mcserve::tools
