#include "engine/sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"

namespace mcserve::engine {

absl::StatusOr<Sampler> Sampler::Create(const SamplingParams& p) {
  if (!(p.temperature >= 0.0f) || !std::isfinite(p.temperature)) {
    return absl::InvalidArgumentError(absl::StrCat("temperature must be a finite number >= 0, got ", p.temperature));
  }
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("top_p must be in (0, 1], got ", p.top_p));
  }
  if (p.top_k < 0) return absl::InvalidArgumentError(absl::StrCat("top_k must be >= 0, got ", p.top_k));
  return Sampler(p);
}

Sampler::Sampler(const SamplingParams& params)
    : params_(params), rng_(params.seed.value_or(std::random_device{}())) {}

int32_t Sampler::Sample(std::span<const float> logits) {
  const int32_t n = static_cast<int32_t>(logits.size());
  if (params_.temperature == 0.0f) {
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  int32_t keep = params_.top_k > 0 ? std::min(params_.top_k, n) : n;
  const float max_logit = logits[order[0]];
  std::vector<double> probs(keep);
  double total = 0;
  for (int32_t i = 0; i < keep; ++i) {
    probs[i] = std::exp((logits[order[i]] - max_logit) / params_.temperature);
    total += probs[i];
  }
  if (params_.top_p < 1.0f) {  // smallest prefix whose mass reaches top_p
    double mass = 0;
    for (int32_t i = 0; i < keep; ++i) {
      mass += probs[i] / total;
      if (mass >= params_.top_p) {
        keep = i + 1;
        break;
      }
    }
    probs.resize(keep);
  }
  std::discrete_distribution<int32_t> pick(probs.begin(), probs.end());
  return order[pick(rng_)];
}

}  // namespace mcserve::engine
