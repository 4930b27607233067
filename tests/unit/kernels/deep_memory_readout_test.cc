// DeepMcReadout on the CPU against an independent double-precision loop: every combine kind (kSum with
// two weight pairs, GRM, SSC with several k, Soup by activation mixing against materialised souped
// weights), with and without the layer norm, page weight scales, decode and prefill sizes (GEMV loops
// and sgemm), thread counts, aliasing; exact identities (SSC with top_k ≥ pages ≡ GRM, Residual keeps
// every page's q skip, no pages ≡ the online memory); the pages McRoute selects on near ties (a list
// reduced to them reads the same); the post-training mean through DeepMemoryAccumulate; and bad
// arguments named in the error.
#include "kernels/deep_memory/deep_mc_readout.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/deep_memory/deep_memory.h"
#include "kernels/mc_route/mc_route.h"
#include "deep_case.h"
#include "random_inputs.h"
#include "route_selection.h"

namespace mcserve::kernels {
namespace {

constexpr float kEps = 1e-5f;

using deep_case::Case;
using deep_case::RandomCase;
using deep_case::RandomWeights;

struct Options {
  DeepMcCombine kind = DeepMcCombine::kSoftmax;
  int top_k = 2;
  float online_weight = 1.0f, cached_weight = 1.0f;
  bool silu = false;         // σ = SiLU instead of GELU
  bool soup_online = false;  // kSoup also given online (rows without pages keep it)
};

std::string Name(const Options& o) {
  switch (o.kind) {
    case DeepMcCombine::kSum: return "sum";
    case DeepMcCombine::kSoftmax: return "softmax";
    case DeepMcCombine::kTopKSoftmax: return "top" + std::to_string(o.top_k);
    case DeepMcCombine::kSoup: return "soup";
  }
  return "?";
}

Tensor F32(const std::vector<float>& v, Shape shape) { return *Tensor::FromHost(v, std::move(shape), Device::kCpu); }
Tensor I32(const std::vector<int32_t>& v) {
  return *Tensor::FromHostI32(v, {static_cast<int64_t>(v.size())}, Device::kCpu);
}

// Tensors and args of one call; out is zero, or `online` itself when alias_online.
struct Inputs {
  Tensor q, u, pool_on, online, out, offsets, token_pages, ln_w, ln_b, online_memory, cu, slot_ids;
  std::vector<Tensor> mem, pooled;
  std::vector<DeepMcPage> pages;
  DeepMcReadoutArgs args;

  Inputs(const Case& c, const Options& o, bool alias_online = false) {
    const int64_t t = c.t, h = c.h, d = c.d;
    const bool gated = o.kind != DeepMcCombine::kSum, soup = o.kind == DeepMcCombine::kSoup;
    q = F32(c.q, {t, h, d});
    u = F32(c.u, {t, h, d});
    pool_on = F32(c.pool_on, {t, h, d});
    online = F32(c.online, {t, h, d});
    out = *Tensor::Zeros(DType::kF32, {t, h, d}, Device::kCpu);
    std::vector<int32_t> off = {0}, idx;
    for (const auto& list : c.lists) {
      idx.insert(idx.end(), list.begin(), list.end());
      off.push_back(static_cast<int32_t>(idx.size()));
    }
    offsets = I32(off);
    token_pages = I32(idx);
    for (size_t i = 0; i < c.mem.size(); ++i) {
      mem.push_back(F32(c.mem[i], {h, c.p()}));
      pooled.push_back(F32(c.pooled[i], {h, d}));
    }
    for (size_t i = 0; i < mem.size(); ++i) pages.push_back({&mem[i], &pooled[i], c.scale[i]});
    args.combine = o.kind;
    args.activation = o.silu ? DeepMcActivation::kSilu : DeepMcActivation::kGelu;
    args.expansion = static_cast<int>(c.x);
    args.top_k = o.top_k;
    args.online_weight = o.online_weight;
    args.cached_weight = o.cached_weight;
    args.ln_eps = kEps;
    if (c.ln) {
      ln_w = F32(c.ln_w, {h, d});
      ln_b = F32(c.ln_b, {h, d});
      args.ln_weight = &ln_w;
      args.ln_bias = &ln_b;
    }
    args.q = &q;
    if (gated) {
      args.u = &u;
      args.online_pool = &pool_on;
    }
    if (soup) {
      online_memory = F32(c.online_memory, {c.slots, h, c.p()});
      std::vector<int32_t> cuv = {0};
      for (int32_t n : c.lens) cuv.push_back(cuv.back() + n);
      cu = I32(cuv);
      slot_ids = I32(c.slot_ids);
      args.online_memory = &online_memory;
      args.layout = {&cu, &slot_ids};
      if (o.soup_online) args.online = &online;
    } else {
      args.online = &online;
    }
    args.pages = pages;
    args.token_page_offsets = &offsets;
    args.token_pages = &token_pages;
    args.out = alias_online ? &online : &out;
  }
};

std::vector<float> RunOp(const Case& c, const Options& o, cpu::ThreadPool* pool, bool alias_online = false) {
  Inputs in(c, o, alias_online);
  const absl::Status s = DeepMcReadout(Context{Device::kCpu, pool}, in.args);
  EXPECT_TRUE(s.ok()) << s;
  return *in.args.out->ToHostF32();
}

// ---- Double-precision reference ----

// M(x) = x + N(W1·σ(W2·x)) for one head's weights w [P] (already scaled) in double; σ = GELU, or SiLU.
std::vector<double> RefRead(const std::vector<double>& w, const float* x, int64_t d, int64_t e, const float* g,
                            const float* b, bool silu = false) {
  std::vector<double> h(e, 0.0), y(d, 0.0), out(d);
  for (int64_t r = 0; r < e; ++r) {
    double z = 0;
    for (int64_t c = 0; c < d; ++c) z += w[r * d + c] * x[c];
    h[r] = silu ? z / (1.0 + std::exp(-z)) : 0.5 * z * (1.0 + std::erf(z / std::sqrt(2.0)));
  }
  for (int64_t j = 0; j < d; ++j) {
    for (int64_t c = 0; c < e; ++c) y[j] += w[e * d + j * e + c] * h[c];
  }
  double mean = 0, var = 0;
  for (double v : y) mean += v / d;
  for (double v : y) var += (v - mean) * (v - mean) / d;
  for (int64_t j = 0; j < d; ++j) {
    const double n = g == nullptr ? y[j] : g[j] * (y[j] - mean) / std::sqrt(var + kEps) + b[j];
    out[j] = x[j] + n;
  }
  return out;
}

// Head hd of a [.., H, P] buffer, times c, in double.
std::vector<double> HeadWeights(const std::vector<float>& w, int64_t hd, int64_t p, double c) {
  std::vector<double> r(p);
  for (int64_t i = 0; i < p; ++i) r[i] = c * w[hd * p + i];
  return r;
}

// The op's semantics in double: scores, a stable sort by score for top-k (ties keep list order),
// softmax over the kept pages and the online memory; kSoup materialises θ* = Σ γ_i·c_i·θ_i.
std::vector<double> Reference(const Case& c, const Options& o) {
  const int64_t d = c.d, e = c.e(), p = c.p();
  std::vector<double> y(c.t * c.h * d);
  std::vector<int32_t> token_slot;
  for (size_t b = 0; b < c.lens.size(); ++b) token_slot.insert(token_slot.end(), c.lens[b], c.slot_ids[b]);
  for (int64_t t = 0; t < c.t; ++t) {
    for (int64_t hd = 0; hd < c.h; ++hd) {
      const int64_t row = t * c.h + hd;
      const float* q = c.q.data() + row * d;
      const float* g = c.ln ? c.ln_w.data() + hd * d : nullptr;
      const float* b = c.ln ? c.ln_b.data() + hd * d : nullptr;
      const auto& list = c.lists[t];
      const int n = static_cast<int>(list.size());
      auto dot = [&](const float* a, const float* bb) {
        double s = 0;
        for (int64_t i = 0; i < d; ++i) s += double(a[i]) * bb[i];
        return s;
      };
      std::vector<double> w(n, o.cached_weight);
      double w_on = o.online_weight;
      if (o.kind != DeepMcCombine::kSum) {
        std::vector<double> z(n);
        for (int i = 0; i < n; ++i) z[i] = dot(c.u.data() + row * d, c.pooled[list[i]].data() + hd * d);
        const double z_on = dot(c.u.data() + row * d, c.pool_on.data() + row * d);
        std::vector<bool> kept(n, true);
        if (o.kind == DeepMcCombine::kTopKSoftmax && n > o.top_k) {
          std::vector<int> order(n);
          std::iota(order.begin(), order.end(), 0);
          std::stable_sort(order.begin(), order.end(), [&](int a, int bb) { return z[a] > z[bb]; });
          std::fill(kept.begin(), kept.end(), false);
          for (int r = 0; r < o.top_k; ++r) kept[order[r]] = true;
        }
        double m = z_on;
        for (int i = 0; i < n; ++i) {
          if (kept[i]) m = std::max(m, z[i]);
        }
        double sum = std::exp(z_on - m);
        for (int i = 0; i < n; ++i) sum += kept[i] ? std::exp(z[i] - m) : 0.0;
        w_on = std::exp(z_on - m) / sum;
        for (int i = 0; i < n; ++i) w[i] = kept[i] ? std::exp(z[i] - m) / sum : 0.0;
      }
      std::vector<double> out(d, 0.0);
      if (o.kind == DeepMcCombine::kSoup && o.soup_online && n == 0) {
        for (int64_t j = 0; j < d; ++j) out[j] = c.online[row * d + j];
      } else if (o.kind == DeepMcCombine::kSoup) {
        std::vector<double> souped = HeadWeights(c.online_memory, token_slot[t] * c.h + hd, p, w_on);
        for (int i = 0; i < n; ++i) {
          const std::vector<double> wi = HeadWeights(c.mem[list[i]], hd, p, w[i] * c.scale[list[i]]);
          for (int64_t x = 0; x < p; ++x) souped[x] += wi[x];
        }
        out = RefRead(souped, q, d, e, g, b, o.silu);
      } else {
        for (int64_t j = 0; j < d; ++j) out[j] = w_on * c.online[row * d + j];
        for (int i = 0; i < n; ++i) {
          const std::vector<double> mi =
              RefRead(HeadWeights(c.mem[list[i]], hd, p, c.scale[list[i]]), q, d, e, g, b, o.silu);
          for (int64_t j = 0; j < d; ++j) out[j] += w[i] * mi[j];
        }
      }
      std::copy(out.begin(), out.end(), y.begin() + row * d);
    }
  }
  return y;
}

void ExpectClose(const std::vector<float>& got, const std::vector<double>& want, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol * (1.0 + std::abs(want[i]))) << what << " at " << i;
  }
}

std::vector<Options> AllOptions() {
  return {{.kind = DeepMcCombine::kSum},
          {.kind = DeepMcCombine::kSum, .online_weight = 0.5f, .cached_weight = 0.25f},
          {.kind = DeepMcCombine::kSoftmax},
          {.kind = DeepMcCombine::kTopKSoftmax, .top_k = 1},
          {.kind = DeepMcCombine::kTopKSoftmax, .top_k = 3},
          {.kind = DeepMcCombine::kSoup}};
}

// Every kind, with and without LN, at decode size (GEMV loops) and prefill size (sgemm: 40 tokens, a
// page read by up to 32 of them per task), on one and three threads.
TEST(DeepMcReadoutTest, EveryKindMatchesReference) {
  cpu::ThreadPool pool(3);
  for (bool ln : {false, true}) {
    for (int64_t t : {3, 40}) {
      const Case c = RandomCase(t, /*h=*/2, /*d=*/8, /*num_pages=*/5, ln, 11 + static_cast<uint32_t>(t));
      for (const Options& o : AllOptions()) {
        const std::string what = Name(o) + (ln ? " ln" : "") + " T=" + std::to_string(t);
        const std::vector<float> got = RunOp(c, o, nullptr);
        ExpectClose(got, Reference(c, o), 2e-5, what);
        EXPECT_EQ(RunOp(c, o, &pool), got) << what << ": thread count changed the result";
      }
    }
  }
}

// σ = SiLU (HOPE's M_mem, no layer norm there, with it too) for every kind, decode and prefill sizes.
TEST(DeepMcReadoutTest, EveryKindWithSiluMatchesReference) {
  for (bool ln : {false, true}) {
    for (int64_t t : {3, 40}) {
      const Case c = RandomCase(t, /*h=*/2, /*d=*/8, /*num_pages=*/5, ln, 71 + static_cast<uint32_t>(t));
      for (Options o : AllOptions()) {
        o.silu = true;
        ExpectClose(RunOp(c, o, nullptr), Reference(c, o), 2e-5, "silu " + Name(o) + " T=" + std::to_string(t));
      }
    }
  }
}

// Soup given online: a row that reads no page keeps o_on exactly; the others are soup as without it.
TEST(DeepMcReadoutTest, SoupWithOnlineKeepsRowsWithoutPages) {
  const Case c = RandomCase(/*t=*/40, /*h=*/2, /*d=*/8, /*num_pages=*/3, false, 81, /*density=*/0.4);
  const Options with{.kind = DeepMcCombine::kSoup, .soup_online = true}, without{.kind = DeepMcCombine::kSoup};
  const std::vector<float> got = RunOp(c, with, nullptr), plain = RunOp(c, without, nullptr);
  ExpectClose(got, Reference(c, with), 2e-5, "soup with online");
  int empty = 0;
  for (int64_t t = 0; t < c.t; ++t) {
    const int64_t n = c.h * c.d, at = t * n;
    const std::vector<float> row(got.begin() + at, got.begin() + at + n);
    if (c.lists[t].empty()) {
      ++empty;
      EXPECT_EQ(row, std::vector<float>(c.online.begin() + at, c.online.begin() + at + n)) << t;
    } else {
      EXPECT_EQ(row, std::vector<float>(plain.begin() + at, plain.begin() + at + n)) << t;
    }
  }
  EXPECT_GT(empty, 0);
}

// Soup by activation mixing ≡ reading the materialised souped weights θ* = Σ γ_i c_i θ_i (the online
// memory's included), the identity of spec B.5.3, with d and e off the 8-lane loops.
TEST(DeepMcReadoutTest, SoupEqualsMaterialisedWeights) {
  for (bool ln : {false, true}) {
    Case c = RandomCase(/*t=*/37, /*h=*/3, /*d=*/6, /*num_pages=*/4, ln, 21, /*density=*/0.9);
    c.x = 3;
    for (size_t i = 0; i < c.mem.size(); ++i) c.mem[i] = RandomWeights(c.h, c.d, c.e(), 400 + i);
    c.online_memory = RandomWeights(c.slots * c.h, c.d, c.e(), 500);
    const Options soup{.kind = DeepMcCombine::kSoup};
    ExpectClose(RunOp(c, soup, nullptr), Reference(c, soup), 2e-5, ln ? "soup ln" : "soup");
  }
}

// SSC with top_k ≥ the number of pages of every token is GRM exactly.
TEST(DeepMcReadoutTest, TopKCoveringAllPagesIsGrm) {
  const Case c = RandomCase(/*t=*/12, /*h=*/2, /*d=*/8, /*num_pages=*/4, true, 31, /*density=*/1.0);
  const std::vector<float> grm = RunOp(c, {.kind = DeepMcCombine::kSoftmax}, nullptr);
  for (int k : {4, 5, 100}) EXPECT_EQ(RunOp(c, {.kind = DeepMcCombine::kTopKSoftmax, .top_k = k}, nullptr), grm) << k;
  EXPECT_NE(RunOp(c, {.kind = DeepMcCombine::kTopKSoftmax, .top_k = 3}, nullptr), grm);
}

// The property SSC's host tier relies on (ssc_routed.cc): reading only the pages McRoute selected
// changes nothing. Here on near ties: every page's pooled key is page 0's with each element one ulp
// up or down at random, so the pages' scores differ by about their rounding, and a read-out that
// rounded its scores otherwise than the router (a fused multiply-add in its dot products) would keep
// other pages than the router selected (it does here: scored with std::fma, this data fails).
TEST(DeepMcReadoutTest, ReadingTheRoutedPagesOnlyChangesNothingOnNearTies) {
  Case c = RandomCase(/*t=*/64, /*h=*/2, /*d=*/16, /*num_pages=*/6, false, 53, /*density=*/1.0);
  std::mt19937 rng(7);
  std::bernoulli_distribution up(0.5);
  for (size_t i = 1; i < c.pooled.size(); ++i) {
    for (size_t j = 0; j < c.pooled[i].size(); ++j) {
      const float x = c.pooled[0][j];
      c.pooled[i][j] = std::nextafter(x, up(rng) ? INFINITY : -INFINITY);
    }
  }
  for (auto& list : c.lists) std::sort(list.begin(), list.end());  // the engine lists pages in order
  for (int top_k : {1, 2}) {
    SCOPED_TRACE(testing::Message() << "top_k=" << top_k);
    const Options o{.kind = DeepMcCombine::kTopKSoftmax, .top_k = top_k};
    Inputs in(c, o);
    std::vector<const Tensor*> keys;
    for (const Tensor& key : in.pooled) keys.push_back(&key);
    Tensor selected = *Tensor::Zeros(DType::kI32, {c.t, c.h, top_k}, Device::kCpu);
    ASSERT_TRUE(McRoute(Context{Device::kCpu, nullptr}, {.top_k = top_k, .u = &in.u, .pooled_keys = keys,
                                                         .token_page_offsets = &in.offsets,
                                                         .token_pages = &in.token_pages, .selected = &selected})
                    .ok());
    Case routed = c;
    routed.lists = ReduceListsToSelection(c.lists, *selected.ToHostI32(), c.h, top_k);
    for (int64_t t = 0; t < c.t; ++t) {
      if (!c.lists[t].empty()) {
        EXPECT_LT(routed.lists[t].size(), c.lists[t].size());  // pages really were dropped
      }
    }
    EXPECT_EQ(RunOp(routed, o, nullptr), RunOp(c, o, nullptr));
  }
}

// Residual (kSum, weights 1) with all-zero cached weights: each page contributes its own q skip plus
// N(0) = ln_bias (0 without LN), none renormalised: y = o_on + n·(q + b) for n pages read.
TEST(DeepMcReadoutTest, ResidualKeepsEveryPagesSkip) {
  for (bool ln : {false, true}) {
    Case c = RandomCase(/*t=*/6, /*h=*/2, /*d=*/8, /*num_pages=*/3, ln, 41);
    for (auto& m : c.mem) std::fill(m.begin(), m.end(), 0.0f);
    const std::vector<float> got = RunOp(c, {.kind = DeepMcCombine::kSum}, nullptr);
    for (int64_t t = 0; t < c.t; ++t) {
      for (int64_t x = 0; x < c.h * c.d; ++x) {
        const int64_t i = t * c.h * c.d + x;
        const float skip = c.q[i] + (ln ? c.ln_b[x] : 0.0f);
        EXPECT_NEAR(got[i], c.online[i] + static_cast<float>(c.lists[t].size()) * skip, 1e-6) << t << " " << x;
      }
    }
  }
}

// No pages: the gated kinds return o_on exactly; kSum scales it; soup reads the online memory alone.
TEST(DeepMcReadoutTest, NoPagesGivesTheOnlineMemory) {
  const Case c = RandomCase(/*t=*/5, /*h=*/2, /*d=*/8, /*num_pages=*/0, true, 51);
  for (DeepMcCombine kind : {DeepMcCombine::kSoftmax, DeepMcCombine::kTopKSoftmax}) {
    EXPECT_EQ(RunOp(c, {.kind = kind}, nullptr), c.online);
  }
  const std::vector<float> half = RunOp(c, {.kind = DeepMcCombine::kSum, .online_weight = 0.5f}, nullptr);
  for (size_t i = 0; i < half.size(); ++i) EXPECT_EQ(half[i], 0.5f * c.online[i]);
  const Options soup{.kind = DeepMcCombine::kSoup};
  ExpectClose(RunOp(c, soup, nullptr), Reference(c, soup), 2e-5, "soup without pages");
}

// out may be `online` itself (kSoup then keeps it for rows without pages; u and online_pool may still
// be passed to kSum: inputs a kind does not read are ignored).
TEST(DeepMcReadoutTest, OutMayAliasOnline) {
  const Case c = RandomCase(/*t=*/40, /*h=*/2, /*d=*/8, /*num_pages=*/3, false, 61);
  for (Options o : AllOptions()) {
    o.soup_online = true;
    const std::vector<float> want = RunOp(c, o, nullptr);
    Inputs in(c, o, /*alias_online=*/true);
    in.args.online = &in.online;
    in.args.u = &in.u;
    in.args.online_pool = &in.pool_on;
    const absl::Status s = DeepMcReadout(Context{}, in.args);
    ASSERT_TRUE(s.ok()) << Name(o) << ": " << s;
    EXPECT_EQ(*in.online.ToHostF32(), want) << Name(o);
  }
}

// Post-training MC (B.5.6): three checkpoints summed by DeepMemoryAccumulate into a running-sum slot,
// read as one page with weight_scale = 1/3, give y = a·M_on(q) + a·M̄(q) with M̄ the memory of the
// averaged weights (a = 1 for "add", ½ for "average").
TEST(DeepMcReadoutTest, PostTrainingMeanReadsAveragedWeights) {
  Case c = RandomCase(/*t=*/7, /*h=*/2, /*d=*/8, /*num_pages=*/3, true, 71, /*density=*/1.0);
  const int64_t slots = 3, slot = 1, per_slot = c.h * c.p();
  Tensor sum = *Tensor::Zeros(DType::kF32, {slots, c.h, c.p()}, Device::kCpu);
  std::vector<float> mean(per_slot, 0.0f);
  for (int i = 0; i < 3; ++i) {
    std::vector<float> state(slots * per_slot, 0.0f);
    std::copy(c.mem[i].begin(), c.mem[i].end(), state.begin() + slot * per_slot);
    Tensor memory = F32(state, {slots, c.h, c.p()}), ids = I32({slot});
    ASSERT_TRUE(DeepMemoryAccumulate(Context{}, {.memory = &memory, .slot_ids = &ids, .sum = &sum}).ok());
    for (int64_t x = 0; x < per_slot; ++x) mean[x] += c.mem[i][x] / 3.0f;
  }
  const std::vector<float> all = *sum.ToHostF32();
  Case read = c;
  read.mem = {std::vector<float>(all.begin() + slot * per_slot, all.begin() + (slot + 1) * per_slot)};
  read.scale = {1.0f / 3.0f};
  for (auto& list : read.lists) list = list.empty() ? list : std::vector<int32_t>{0};
  Case want = read;
  want.mem = {mean};
  want.scale = {1.0f};
  for (float a : {1.0f, 0.5f}) {
    const Options o{.kind = DeepMcCombine::kSum, .online_weight = a, .cached_weight = a};
    ExpectClose(RunOp(read, o, nullptr), Reference(want, o), 2e-5, "mean a=" + std::to_string(a));
  }
}

// Bad arguments are InvalidArgument naming the argument.
TEST(DeepMcReadoutValidation, BadArgumentsAreNamed) {
  const Case c = RandomCase(/*t=*/4, /*h=*/2, /*d=*/4, /*num_pages=*/2, true, 81);
  auto zeros = [](Shape s) { return *Tensor::Zeros(DType::kF32, std::move(s), Device::kCpu); };
  Tensor bad3 = zeros({4, 2, 5}), mem_bad = zeros({2, 10}), pool_bad = zeros({2, 5}), ln_bad = zeros({2, 5});
  Tensor om_bad = zeros({4, 2, 10}), offsets_bad = I32({1, 1, 1, 1, 1});
  std::vector<int32_t> idx;
  for (const auto& list : c.lists) idx.insert(idx.end(), list.begin(), list.end());
  idx[0] = 2;  // page 2 of 2
  Tensor pages_oob = I32(idx);
  Tensor slots_oob = I32({2, 0, 4});
  struct Bad {
    std::string want;
    DeepMcCombine kind;
    std::function<void(Inputs&)> mutate;
  };
  const std::vector<Bad> bad = {
      {"q", DeepMcCombine::kSum, [&](Inputs& in) { in.args.q = nullptr; }},
      {"online", DeepMcCombine::kSum, [&](Inputs& in) { in.args.online = nullptr; }},
      {"online", DeepMcCombine::kSum, [&](Inputs& in) { in.args.online = &bad3; }},
      {"u", DeepMcCombine::kSoftmax, [&](Inputs& in) { in.args.u = nullptr; }},
      {"online_pool", DeepMcCombine::kTopKSoftmax, [&](Inputs& in) { in.args.online_pool = &bad3; }},
      {"top_k", DeepMcCombine::kTopKSoftmax, [&](Inputs& in) { in.args.top_k = 0; }},
      {"expansion", DeepMcCombine::kSum, [&](Inputs& in) { in.args.expansion = 0; }},
      {"pages[0].memory", DeepMcCombine::kSum, [&](Inputs& in) { in.args.expansion = 2; }},
      {"pages[1].memory", DeepMcCombine::kSum, [&](Inputs& in) { in.pages[1].memory = &mem_bad; }},
      {"pages[0].pooled_key", DeepMcCombine::kSoup, [&](Inputs& in) { in.pages[0].pooled_key = &pool_bad; }},
      {"pages[1].pooled_key", DeepMcCombine::kSoftmax, [&](Inputs& in) { in.pages[1].pooled_key = nullptr; }},
      {"pages[0].weight_scale", DeepMcCombine::kSum, [&](Inputs& in) { in.pages[0].weight_scale = NAN; }},
      {"online_weight", DeepMcCombine::kSum, [&](Inputs& in) { in.args.online_weight = INFINITY; }},
      {"ln_bias", DeepMcCombine::kSum, [&](Inputs& in) { in.args.ln_bias = nullptr; }},
      {"ln_weight", DeepMcCombine::kSum, [&](Inputs& in) { in.args.ln_weight = &ln_bad; }},
      {"ln_eps", DeepMcCombine::kSum, [&](Inputs& in) { in.args.ln_eps = -1.0f; }},
      {"online_memory", DeepMcCombine::kSoup, [&](Inputs& in) { in.args.online_memory = nullptr; }},
      {"online_memory", DeepMcCombine::kSoup, [&](Inputs& in) { in.args.online_memory = &om_bad; }},
      {"layout", DeepMcCombine::kSoup, [&](Inputs& in) { in.args.layout.slot_ids = nullptr; }},
      {"slot", DeepMcCombine::kSoup, [&](Inputs& in) { in.args.layout.slot_ids = &slots_oob; }},
      {"token_page_offsets", DeepMcCombine::kSum, [&](Inputs& in) { in.args.token_page_offsets = &offsets_bad; }},
      {"token_pages", DeepMcCombine::kSum, [&](Inputs& in) { in.args.token_pages = &pages_oob; }},
      {"out", DeepMcCombine::kSum, [&](Inputs& in) { in.args.out = &bad3; }},
      {"out overlaps q", DeepMcCombine::kSum, [&](Inputs& in) { in.args.out = &in.q; }},
      {"out overlaps pages[1].memory", DeepMcCombine::kSoftmax, [&](Inputs& in) {
         const Tensor storage = zeros({8, 32});  // a page's [H, P] and out's [T, H, d] share it
         in.mem[1] = *storage.Reshape({2, 128});
         in.pages[1].memory = &in.mem[1];
         in.out = *storage.Rows(0, 1).Reshape({4, 2, 4});
         in.args.out = &in.out;
       }},
      {"unknown combine", DeepMcCombine::kSum, [&](Inputs& in) { in.args.combine = static_cast<DeepMcCombine>(9); }},
  };
  for (const Bad& b : bad) {
    Options o{.kind = b.kind};
    Inputs in(c, o);
    ASSERT_TRUE(DeepMcReadout(Context{}, in.args).ok()) << b.want;
    b.mutate(in);
    in.args.pages = in.pages;
    const absl::Status s = DeepMcReadout(Context{}, in.args);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << b.want << ": " << s;
    EXPECT_NE(s.message().find(b.want), std::string::npos) << b.want << ": " << s;
  }
}

}  // namespace
}  // namespace mcserve::kernels
