#include "engine/sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <bit>
#include <functional>
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

// exp(x) for x ≤ 0 with ~2e-7 relative error; 0 below −87 and for −inf / NaN. Written so GCC
// vectorises the loops over the vocabulary (no clamps or selects on floats: the out-of-range
// result is masked off as bits). exp(0) is exactly 1.
inline float FastExp(float x) {
  const int32_t in_range = -static_cast<int32_t>(x >= -87.0f);  // all ones or 0
  // n = round(x / ln 2) with the 1.5·2^23 trick (floor() would block vectorisation).
  const float n = (x * 1.44269504f + 12582912.0f) - 12582912.0f;
  const float r = (x - n * 0.693145751953125f) - n * 1.428606765330187e-6f;  // |r| ≤ ln2 / 2
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const float v = p * std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
  return std::bit_cast<float>(std::bit_cast<int32_t>(v) & in_range);
}

// 8 floats (GCC/Clang vector extension): GCC does not vectorise float max/sum reductions without
// -ffast-math, so MaxOf and Sum use explicit lanes.
using Lanes = float __attribute__((vector_size(32)));

Lanes Load(const float* p) {
  Lanes v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// 4 floats: this file is built for baseline x86-64, where 8-float lanes become SSE pairs spilled to
// the stack (greedy sampling at 32 requests was 2.8% of a step).
using Lanes4 = float __attribute__((vector_size(16)));

// Largest element, NaN ignored (a NaN never compares greater). Two 4-float accumulators.
float MaxOf(std::span<const float> x) {
  Lanes4 a = {kNegInf, kNegInf, kNegInf, kNegInf}, b = a;
  size_t i = 0;
  for (; i + 8 <= x.size(); i += 8) {
    Lanes4 u, v;
    std::memcpy(&u, x.data() + i, sizeof(u));
    std::memcpy(&v, x.data() + i + 4, sizeof(v));
    a = u > a ? u : a;
    b = v > b ? v : b;
  }
  float m = kNegInf;
  for (; i < x.size(); ++i) m = x[i] > m ? x[i] : m;
  for (int j = 0; j < 4; ++j) m = std::max({m, a[j], b[j]});
  return m;
}

// The lowest index holding the largest element (NaN ignored), or -1 when every element is −inf/NaN.
int32_t FirstMaxIndex(std::span<const float> x) {
  const float best = MaxOf(x);
  if (!(best > kNegInf)) return -1;
  return static_cast<int32_t>(std::find(x.begin(), x.end(), best) - x.begin());
}

// Σ x, in float lanes per block of 256 and double across blocks.
double Sum(std::span<const float> x) {
  double total = 0.0;
  for (size_t begin = 0; begin < x.size(); begin += 256) {
    const size_t end = std::min(x.size(), begin + 256);
    Lanes lanes = {0, 0, 0, 0, 0, 0, 0, 0};
    size_t i = begin;
    for (; i + 8 <= end; i += 8) lanes += Load(x.data() + i);
    for (; i < end; ++i) total += x[i];
    for (int j = 0; j < 8; ++j) total += lanes[j];
  }
  return total;
}

// Σ FastExp(x − shift) over x; `buffer` is scratch of x's size. (Not inlined: inlined, GCC loses
// the restrict pointers and leaves the loop scalar.)
[[gnu::noinline]] double SumExp(std::span<const float> x, float shift, std::vector<float>& buffer) {
  buffer.resize(x.size());
  const float* __restrict in = x.data();
  float* __restrict out = buffer.data();
  for (size_t i = 0; i < x.size(); ++i) out[i] = FastExp(in[i] - shift);
  return Sum(buffer);
}

// out[i] = FastExp(in[i] − shift) where in[i] ≥ floor, else 0; returns how many are > 0.
[[gnu::noinline]] size_t ExpWeights(const float* __restrict in, float* __restrict out, size_t n, float shift,
                                    float floor) {
  size_t positive = 0;
  for (size_t i = 0; i < n; ++i) {
    const float w = in[i] >= floor ? FastExp(in[i] - shift) : 0.0f;
    out[i] = w;
    positive += w > 0.0f;
  }
  return positive;
}

// The k-th largest value of x (1 ≤ k < size): a bounded min-heap for small k, else nth_element.
float KthLargest(std::span<const float> x, int k, std::vector<float>& scratch) {
  if (k <= 256) {
    scratch.assign(x.begin(), x.begin() + k);
    std::make_heap(scratch.begin(), scratch.end(), std::greater<float>());
    for (size_t i = k; i < x.size(); ++i) {
      if (x[i] > scratch.front()) {
        std::pop_heap(scratch.begin(), scratch.end(), std::greater<float>());
        scratch.back() = x[i];
        std::push_heap(scratch.begin(), scratch.end(), std::greater<float>());
      }
    }
    return scratch.front();
  }
  scratch.assign(x.begin(), x.end());
  std::nth_element(scratch.begin(), scratch.begin() + (k - 1), scratch.end(), std::greater<float>());
  return scratch[k - 1];
}

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
  for (float& x : work_) x = x != x ? kNegInf : x;  // NaN → −inf
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
  const size_t n = work_.size();
  const float inv_t = 1.0f / params_.temperature;
  for (float& x : work_) x *= inv_t;
  const float max_logit = MaxOf(work_);
  if (!(max_logit > kNegInf)) return -1;

  // Top-k: tokens below the k-th largest logit get weight 0 (ties with it stay, as vLLM's
  // threshold mask keeps them).
  float kth = kNegInf;
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < n) kth = KthLargest(work_, params_.top_k, scratch_);
  weights_.resize(n);
  const size_t positive = ExpWeights(work_.data(), weights_.data(), n, max_logit, kth);
  const double total = Sum(weights_);

  // Candidates. Top-p never keeps a token of weight ≤ (1 − top_p)·total / positive: all tokens at
  // or below that weight together hold at most (1 − top_p) of the mass. Without top-p, min-p's
  // cut (w ≥ min_p · w_max, w_max = 1) applies here directly.
  double cut = 0.0;
  if (params_.top_p < 1.0f) cut = (1.0 - static_cast<double>(params_.top_p)) * total / static_cast<double>(positive);
  const float min_w = params_.top_p < 1.0f ? 0.0f : params_.min_p;
  cands_.clear();
  for (size_t i = 0; i < n; ++i) {
    const float w = weights_[i];
    if (w > 0.0f && w > cut && w >= min_w) cands_.push_back({w, static_cast<int32_t>(i)});
  }
  if (params_.top_p < 1.0f) {
    KeepNucleus(total);
    if (params_.min_p > 0.0f) {
      const double threshold = params_.min_p;
      std::erase_if(cands_, [&](const Candidate& c) { return c.weight < threshold; });
    }
  }
  if (cands_.empty()) return -1;

  double kept = 0.0;
  for (const Candidate& c : cands_) kept += c.weight;
  const double u = Uniform01(rng_) * kept;
  double acc = 0.0;
  for (const Candidate& c : cands_) {
    acc += c.weight;
    if (u < acc) return c.id;
  }
  return cands_.back().id;  // rounding: u landed on the total
}

void Sampler::KeepNucleus(double total) {
  // vLLM keeps a token iff the mass of the tokens more likely than it (ties: lower id first) is
  // < top_p. Weighted quickselect: expected O(n), no full sort.
  const double limit = static_cast<double>(params_.top_p) * total;
  const auto more = [](const Candidate& a, const Candidate& b) {
    return a.weight != b.weight ? a.weight > b.weight : a.id < b.id;
  };
  auto begin = cands_.begin();
  size_t lo = 0, hi = cands_.size();  // [0, lo) kept, [hi, size) dropped
  double acc = 0.0;                   // mass of [0, lo)
  while (hi - lo > 32 && acc < limit) {
    const Candidate& a = cands_[lo];
    const Candidate& b = cands_[lo + (hi - lo) / 2];
    const Candidate& c = cands_[hi - 1];
    const Candidate pivot = more(a, b) ? (more(b, c) ? b : (more(a, c) ? c : a)) : (more(a, c) ? a : (more(b, c) ? c : b));
    const size_t m = std::partition(begin + lo, begin + hi, [&](const Candidate& x) { return more(x, pivot); }) - begin;
    std::iter_swap(begin + m, std::find_if(begin + m, begin + hi, [&](const Candidate& x) { return x.id == pivot.id; }));
    double mass = 0.0;
    for (size_t i = lo; i < m; ++i) mass += cands_[i].weight;
    if (acc + mass >= limit) {
      hi = m;  // the boundary is inside [lo, m)
    } else {
      acc += mass + cands_[m].weight;  // [lo, m) and the pivot are kept
      lo = m + 1;
    }
  }
  std::sort(begin + lo, begin + hi, more);
  size_t keep = lo;
  for (; keep < hi && acc < limit; ++keep) acc += cands_[keep].weight;
  cands_.resize(keep);
}

SampledToken Sampler::Sample(std::span<const float> logits, std::span<const int32_t> banned) {
  if (logits.empty()) return SampledToken{};
  // The rows that can be picked: the tokenizer's ids (padding rows past them never are).
  const std::span<const float> pickable = logits.first(std::min<size_t>(logits.size(), vocab_size_));
  const int32_t n = static_cast<int32_t>(pickable.size());
  const bool adjusted = !params_.logit_bias.empty() || params_.repetition_penalty != 1.0f ||
                        params_.frequency_penalty != 0.0f || params_.presence_penalty != 0.0f;
  // Greedy with nothing that moves a logit: the raw logits' first maximum, read in place (MaxOf
  // ignores NaN, as the adjusted copy's −inf would be). When it is not banned it is also the first
  // maximum of the unbanned ones; when it is, the adjusted copy decides.
  const bool in_place = params_.temperature == 0.0f && !adjusted;
  int32_t id = in_place ? FirstMaxIndex(pickable) : -1;
  const bool picked_banned = id >= 0 && std::find(banned.begin(), banned.end(), id) != banned.end();
  if (!in_place || picked_banned) {
    work_.assign(pickable.begin(), pickable.end());
    ApplyAdjustments(banned);
    id = params_.temperature == 0.0f ? FirstMaxIndex(work_) : Draw();
  }
  if (id < 0) {  // every token is banned or −inf: the lowest id that is not banned
    std::vector<int32_t> sorted_banned(banned.begin(), banned.end());
    std::sort(sorted_banned.begin(), sorted_banned.end());
    id = 0;
    while (id < n - 1 && std::binary_search(sorted_banned.begin(), sorted_banned.end(), id)) ++id;
  }
  ++output_counts_[id];

  SampledToken out;
  out.id = id;
  if (params_.logprobs == 0) return out;  // nobody reads it: skip the pass over the vocabulary
  // Log-softmax of the raw logits, every row (max-shifted; NaN counts as −inf).
  const float max_raw = MaxOf(logits);
  const double lse = max_raw > kNegInf ? max_raw + std::log(SumExp(logits, max_raw, scratch_)) : 0.0;
  const auto logprob = [&](int32_t i) {
    const float x = logits[i];
    return std::isnan(x) || x == kNegInf || max_raw == kNegInf ? kNegInf : static_cast<float>(x - lse);
  };
  out.logprob = logprob(id);
  if (params_.logprobs > 0) {
    // Top-n pickable ids by raw logit (ties to the lower id) with a bounded heap: O(vocab · log n).
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
