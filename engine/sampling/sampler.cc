#include "engine/sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace mcserve::engine {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr int kMaxLogprobs = 20;

absl::Status Invalid(const char* name, const char* rule, double got) {
  return absl::InvalidArgumentError(absl::StrCat(name, " must be ", rule, ", got ", got));
}

// Uniform double in [0, 1) from 53 random bits (portable, unlike std::generate_canonical).
double Uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

}  // namespace

absl::StatusOr<Sampler> Sampler::Create(const SamplingParams& p, int vocab_size) {
  if (vocab_size <= 0) return Invalid("vocab_size", "positive", vocab_size);
  if (!(p.temperature >= 0.0f) || !std::isfinite(p.temperature)) {
    return Invalid("temperature", "a finite number >= 0", p.temperature);
  }
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) return Invalid("top_p", "in (0, 1]", p.top_p);
  if (p.top_k < -1) return Invalid("top_k", "-1 or 0 (all tokens) or positive", p.top_k);
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) return Invalid("min_p", "in [0, 1]", p.min_p);
  if (!(p.repetition_penalty > 0.0f) || !std::isfinite(p.repetition_penalty)) {
    return Invalid("repetition_penalty", "a finite number > 0", p.repetition_penalty);
  }
  if (!(p.presence_penalty >= -2.0f && p.presence_penalty <= 2.0f)) {
    return Invalid("presence_penalty", "in [-2, 2]", p.presence_penalty);
  }
  if (!(p.frequency_penalty >= -2.0f && p.frequency_penalty <= 2.0f)) {
    return Invalid("frequency_penalty", "in [-2, 2]", p.frequency_penalty);
  }
  if (p.logprobs < 0 || p.logprobs > kMaxLogprobs) return Invalid("logprobs", "in [0, 20]", p.logprobs);
  for (const auto& [id, bias] : p.logit_bias) {
    if (id < 0 || id >= vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("logit_bias token id ", id, " is outside the vocabulary [0, ", vocab_size, ")"));
    }
    if (!std::isfinite(bias)) {
      return absl::InvalidArgumentError(absl::StrCat("logit_bias value for token ", id, " must be finite, got ", bias));
    }
  }
  return Sampler(p, vocab_size);
}

Sampler::Sampler(const SamplingParams& params, int vocab_size)
    : params_(params),
      vocab_size_(vocab_size),
      rng_(params.seed.has_value() ? *params.seed : (static_cast<uint64_t>(std::random_device{}()) << 32) ^
                                                        std::random_device{}()) {}

void Sampler::SetPrompt(std::span<const int32_t> prompt) {
  prompt_ids_.clear();
  prompt_ids_.insert(prompt.begin(), prompt.end());
}

void Sampler::ApplyAdjustments(std::span<const int32_t> banned) {
  const int32_t n = static_cast<int32_t>(work_.size());
  for (float& x : work_) {
    if (std::isnan(x)) x = kNegInf;
  }
  for (const auto& [id, bias] : params_.logit_bias) {
    if (id < n) work_[id] += bias;
  }
  for (int32_t id : banned) {
    if (id >= 0 && id < n) work_[id] = kNegInf;
  }
  const float rho = params_.repetition_penalty;
  const auto repeat = [&](int32_t id) {
    float& x = work_[id];
    x = x > 0.0f ? x / rho : x * rho;
  };
  if (rho != 1.0f) {
    for (int32_t id : prompt_ids_) {
      if (id >= 0 && id < n) repeat(id);
    }
  }
  const bool freq_pres = params_.frequency_penalty != 0.0f || params_.presence_penalty != 0.0f;
  if (rho == 1.0f && !freq_pres) return;
  for (const auto& [id, count] : output_counts_) {
    if (id < 0 || id >= n) continue;
    if (rho != 1.0f && !prompt_ids_.contains(id)) repeat(id);
    work_[id] -= params_.frequency_penalty * static_cast<float>(count) + params_.presence_penalty;
  }
}

int32_t Sampler::Draw() {
  const int32_t n = static_cast<int32_t>(work_.size());
  const float inv_t = 1.0f / params_.temperature;
  float max_logit = kNegInf;
  for (float& x : work_) {
    x *= inv_t;
    max_logit = std::max(max_logit, x);
  }
  if (max_logit == kNegInf) return -1;

  // Candidates: all finite tokens, or those at least as likely as the k-th (ties at the boundary
  // kept, as vLLM's threshold mask does).
  ids_.clear();
  const int k = params_.top_k > 0 ? params_.top_k : 0;
  float kth = kNegInf;
  if (k > 0 && k < n) {
    ids_.resize(n);
    for (int32_t i = 0; i < n; ++i) ids_[i] = i;
    std::nth_element(ids_.begin(), ids_.begin() + (k - 1), ids_.end(),
                     [&](int32_t a, int32_t b) { return work_[a] > work_[b]; });
    kth = work_[ids_[k - 1]];
    ids_.clear();
  }
  for (int32_t i = 0; i < n; ++i) {
    if (work_[i] > kNegInf && work_[i] >= kth) ids_.push_back(i);
  }
  probs_.resize(ids_.size());
  double total = 0.0;
  for (size_t i = 0; i < ids_.size(); ++i) {
    probs_[i] = std::exp(static_cast<double>(work_[ids_[i]]) - max_logit);
    total += probs_[i];
  }
  size_t keep = ids_.size();

  if (params_.top_p < 1.0f) {
    // Keep the most likely tokens while the mass before them is < top_p; sort only a growing head
    // of the candidates (the nucleus is usually small). The order is (weight desc, id asc).
    std::vector<size_t> order(ids_.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    const auto more_likely = [&](size_t a, size_t b) {
      return probs_[a] != probs_[b] ? probs_[a] > probs_[b] : ids_[a] < ids_[b];
    };
    const double limit = static_cast<double>(params_.top_p) * total;
    size_t sorted = 0, nucleus = 0;
    double mass = 0.0;
    while (true) {  // sort the next chunk of the remaining candidates (×4 each round)
      const size_t next = std::min(order.size(), std::max<size_t>(64, sorted * 4));
      std::partial_sort(order.begin() + sorted, order.begin() + next, order.end(), more_likely);
      for (; nucleus < next && mass < limit; ++nucleus) mass += probs_[order[nucleus]];
      if (mass >= limit || next == order.size()) break;
      sorted = next;
    }
    std::vector<int32_t> ids(nucleus);
    std::vector<double> probs(nucleus);
    total = 0.0;
    for (size_t i = 0; i < nucleus; ++i) {
      ids[i] = ids_[order[i]];
      probs[i] = probs_[order[i]];
      total += probs[i];
    }
    ids_.swap(ids);
    probs_.swap(probs);
    keep = nucleus;
  }

  if (params_.min_p > 0.0f) {
    // p < min_p · p_max ⇔ w < min_p · w_max; the max token has weight exp(0) = 1.
    const double threshold = static_cast<double>(params_.min_p);
    size_t out = 0;
    total = 0.0;
    for (size_t i = 0; i < keep; ++i) {
      if (probs_[i] < threshold) continue;
      ids_[out] = ids_[i];
      probs_[out] = probs_[i];
      total += probs_[i];
      ++out;
    }
    keep = out;
  }

  const double u = Uniform01(rng_) * total;
  double acc = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    acc += probs_[i];
    if (u < acc) return ids_[i];
  }
  return ids_[keep - 1];  // rounding: u landed on the total
}

SampledToken Sampler::Sample(std::span<const float> logits, std::span<const int32_t> banned) {
  const int32_t n = static_cast<int32_t>(logits.size());
  work_.assign(logits.begin(), logits.end());
  ApplyAdjustments(banned);

  int32_t id = -1;
  if (params_.temperature == 0.0f) {
    float best = kNegInf;
    for (int32_t i = 0; i < n; ++i) {
      if (work_[i] > best) {
        best = work_[i];
        id = i;
      }
    }
  } else {
    id = Draw();
  }
  if (id < 0) {  // every token is banned or −inf: the lowest id that is not banned
    std::vector<int32_t> sorted_banned(banned.begin(), banned.end());
    std::sort(sorted_banned.begin(), sorted_banned.end());
    id = 0;
    while (id < n - 1 && std::binary_search(sorted_banned.begin(), sorted_banned.end(), id)) ++id;
  }
  ++output_counts_[id];

  // Log-softmax of the raw logits (max-shifted, summed in double).
  SampledToken out;
  out.id = id;
  float max_raw = kNegInf;
  for (float x : logits) {
    if (x > max_raw) max_raw = x;
  }
  double sum = 0.0;
  if (max_raw > kNegInf) {
    for (float x : logits) {
      if (x > kNegInf) sum += std::exp(static_cast<double>(x) - max_raw);
    }
  }
  const double lse = max_raw > kNegInf ? max_raw + std::log(sum) : 0.0;
  const auto logprob = [&](int32_t i) {
    const float x = logits[i];
    return std::isnan(x) || x == kNegInf || max_raw == kNegInf ? kNegInf : static_cast<float>(x - lse);
  };
  out.logprob = logprob(id);
  if (params_.logprobs > 0) {
    // Top-n by raw logit (ties to the lower id) with a bounded heap: O(vocab · log n).
    const int top_n = std::min(params_.logprobs, n);
    const auto better = [&](int32_t a, int32_t b) {
      const float la = std::isnan(logits[a]) ? kNegInf : logits[a];
      const float lb = std::isnan(logits[b]) ? kNegInf : logits[b];
      return la != lb ? la > lb : a < b;
    };
    std::vector<int32_t> heap;  // worst of the kept at the front
    heap.reserve(top_n + 1);
    for (int32_t i = 0; i < n; ++i) {
      if (static_cast<int>(heap.size()) < top_n) {
        heap.push_back(i);
        std::push_heap(heap.begin(), heap.end(), better);
      } else if (better(i, heap.front())) {
        std::pop_heap(heap.begin(), heap.end(), better);
        heap.back() = i;
        std::push_heap(heap.begin(), heap.end(), better);
      }
    }
    std::sort(heap.begin(), heap.end(), better);
    out.top.reserve(heap.size());
    for (int32_t i : heap) out.top.push_back({i, logprob(i)});
  }
  return out;
}

}  // namespace mcserve::engine
