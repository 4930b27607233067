// DeepMemory (MLP memories, spec B.2.3–B.2.5) on the CPU: the closed-form update against central
// finite differences of the inner objective (DLA and Titans, with and without the layer norm); whole
// sequences against an independently written double-precision reference (explicit LN Jacobian) for
// b = 1 and b = 3 with a stored anchor; inner chunks of b = 4 split at arbitrary call boundaries ≡ one
// call; varlen batches with scattered slots ≡ each sequence alone; the Titans loss decreasing;
// and DeepMemoryAccumulate (bad arguments: deep_memory_validation_test.cc).
#include "kernels/deep_memory/deep_memory.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/thread_pool.h"
#include "random_inputs.h"

namespace mcserve::kernels {
namespace {

using Rule = DeepMemoryRule;

struct Config {
  std::string name;
  Rule rule = Rule::kDla;
  bool ln = false;
  int chunk = 1;
  int64_t d = 8, expansion = 4, heads = 2;
  int64_t e() const { return expansion * d; }
  int64_t p() const { return 2 * e() * d; }
  bool titans() const { return rule == Rule::kTitans; }
};

void PrintTo(const Config& c, std::ostream* os) { *os << c.name; }

// Row-major host inputs of T tokens; ln_w / ln_b [H, d] (empty without LN).
struct Inputs {
  int64_t t = 0;
  std::vector<float> q, k, v, step, alpha, beta;
};

void NormalizeRows(std::vector<float>& x, int64_t dim) {
  for (size_t r = 0; r + dim <= x.size(); r += dim) {
    double n = 0;
    for (int64_t i = 0; i < dim; ++i) n += double(x[r + i]) * x[r + i];
    for (int64_t i = 0; i < dim; ++i) x[r + i] = static_cast<float>(x[r + i] / std::sqrt(n + 1e-12));
  }
}

Inputs MakeInputs(const Config& c, int64_t t, uint32_t seed) {
  Inputs in;
  in.t = t;
  const int64_t n = t * c.heads * c.d;
  in.q = RandomVector(n, seed);
  in.k = RandomVector(n, seed + 1);
  NormalizeRows(in.q, c.d);
  NormalizeRows(in.k, c.d);
  in.v = RandomVector(n, seed + 2);
  // The layer norm scales ∂/∂y by 1/std(y) (≈ 20 here): smaller steps keep the recurrence contractive,
  // so fp32 rounding is not amplified over the sequence.
  const float max_step = (c.titans() ? 0.3f : 0.2f) * (c.ln ? 0.1f : 1.0f);
  in.step = RandomVector(t * c.heads, seed + 3, 0.2f * max_step, max_step);
  if (c.titans()) {
    in.alpha = RandomVector(t * c.heads, seed + 4, 0.9f, 1.0f);
    in.beta = RandomVector(t * c.heads, seed + 5, 0.5f, 0.9f);
  }
  return in;
}

std::vector<float> SliceRows(const std::vector<float>& x, int64_t rows, int64_t r0, int64_t r1) {
  if (x.empty()) return x;
  const int64_t row = static_cast<int64_t>(x.size()) / rows;
  return std::vector<float>(x.begin() + r0 * row, x.begin() + r1 * row);
}

Inputs Slice(const Inputs& in, int64_t r0, int64_t r1) {
  return {r1 - r0,
          SliceRows(in.q, in.t, r0, r1),
          SliceRows(in.k, in.t, r0, r1),
          SliceRows(in.v, in.t, r0, r1),
          SliceRows(in.step, in.t, r0, r1),
          SliceRows(in.alpha, in.t, r0, r1),
          SliceRows(in.beta, in.t, r0, r1)};
}

void Append(Inputs& dst, const Inputs& src) {
  dst.t += src.t;
  for (auto [a, b] : {std::pair{&dst.q, &src.q}, {&dst.k, &src.k}, {&dst.v, &src.v}, {&dst.step, &src.step},
                      {&dst.alpha, &src.alpha}, {&dst.beta, &src.beta}}) {
    a->insert(a->end(), b->begin(), b->end());
  }
}

// Per-slot state on the host: memory, momentum (Titans), anchor (b > 1), each [slots, H, P].
struct State {
  int64_t slots = 0;
  std::vector<float> memory, momentum, anchor;
};

// Weights around the scale of a trained memory: W2 ~ U(±1)/√d, W1 ~ U(±1)/√e.
State RandomState(const Config& c, int64_t slots, uint32_t seed) {
  State s;
  s.slots = slots;
  const int64_t e = c.e(), d = c.d, p = c.p();
  s.memory = RandomVector(slots * c.heads * p, seed);
  for (int64_t x = 0; x < slots * c.heads * p; ++x) {
    s.memory[x] /= static_cast<float>(std::sqrt(double(x % p < e * d ? d : e)));
  }
  if (c.titans()) s.momentum = RandomVector(slots * c.heads * p, seed + 1, -0.01f, 0.01f);
  if (c.chunk > 1) {
    s.anchor = s.memory;
    const std::vector<float> noise = RandomVector(s.anchor.size(), seed + 2, -0.05f, 0.05f);
    for (size_t x = 0; x < noise.size(); ++x) s.anchor[x] += noise[x];
  }
  return s;
}

struct Ln {
  std::vector<float> w, b;  // [H, d] each; empty: N = identity
};
Ln MakeLn(const Config& c, uint32_t seed) {
  if (!c.ln) return {};
  return {RandomVector(c.heads * c.d, seed, 0.5f, 1.5f), RandomVector(c.heads * c.d, seed + 1, -0.2f, 0.2f)};
}

constexpr float kEps = 1e-5f;

Tensor F32(const std::vector<float>& v, Shape shape) { return *Tensor::FromHost(v, std::move(shape), Device::kCpu); }
Tensor I32(const std::vector<int32_t>& v) {
  return *Tensor::FromHostI32(v, {static_cast<int64_t>(v.size())}, Device::kCpu);
}

// One DeepMemory call; updates `st` and returns out [T, H, d].
std::vector<float> RunOp(const Context& ctx, const Config& c, const Inputs& in, const std::vector<int32_t>& lens,
                       const std::vector<int32_t>& slots, const std::vector<int32_t>& offsets, const Ln& ln,
                       State& st) {
  const int64_t t = in.t, h = c.heads, d = c.d;
  std::vector<int32_t> cu = {0};
  for (int32_t n : lens) cu.push_back(cu.back() + n);
  Tensor q = F32(in.q, {t, h, d}), k = F32(in.k, {t, h, d}), v = F32(in.v, {t, h, d}), step = F32(in.step, {t, h});
  Tensor alpha = c.titans() ? F32(in.alpha, {t, h}) : Tensor(), beta = c.titans() ? F32(in.beta, {t, h}) : Tensor();
  Tensor ln_w = c.ln ? F32(ln.w, {h, d}) : Tensor(), ln_b = c.ln ? F32(ln.b, {h, d}) : Tensor();
  Tensor cut = I32(cu), slt = I32(slots), off = I32(offsets);
  const Shape state_shape = {st.slots, h, c.p()};
  Tensor memory = F32(st.memory, state_shape);
  Tensor momentum = c.titans() ? F32(st.momentum, state_shape) : Tensor();
  Tensor anchor = c.chunk > 1 ? F32(st.anchor, state_shape) : Tensor();
  Tensor out = *Tensor::Zeros(DType::kF32, {t, h, d}, Device::kCpu);
  DeepMemoryArgs a;
  a.rule = c.rule;
  a.expansion = static_cast<int>(c.expansion);
  a.inner_chunk_size = c.chunk;
  a.ln_eps = kEps;
  a.q = &q;
  a.k = &k;
  a.v = &v;
  a.step = &step;
  if (c.titans()) {
    a.retention = &alpha;
    a.momentum_gate = &beta;
    a.momentum = &momentum;
  }
  if (c.ln) {
    a.ln_weight = &ln_w;
    a.ln_bias = &ln_b;
  }
  if (c.chunk > 1) {
    a.inner_offset = &off;
    a.anchor = &anchor;
  }
  a.layout = {&cut, &slt};
  a.memory = &memory;
  a.out = &out;
  const absl::Status s = DeepMemory(ctx, a);
  EXPECT_TRUE(s.ok()) << s;
  st.memory = *memory.ToHostF32();
  if (c.titans()) st.momentum = *momentum.ToHostF32();
  if (c.chunk > 1) st.anchor = *anchor.ToHostF32();
  return *out.ToHostF32();
}

// ---- Double-precision reference, written from the spec independently of deep_memory_math.h ----

double RefGelu(double z) { return 0.5 * z * (1.0 + std::erf(z / std::sqrt(2.0))); }
double RefGeluGrad(double z) {
  return 0.5 * (1.0 + std::erf(z / std::sqrt(2.0))) + z * std::exp(-0.5 * z * z) / std::sqrt(2.0 * M_PI);
}

// One head's weights θ [P] (W2 [e, d] then W1 [d, e]) and the head's LN parameters.
struct RefMlp {
  int64_t d, e;
  const float *g = nullptr, *b = nullptr;  // [d] or null

  double& W2(std::vector<double>& w, int64_t r, int64_t c) const { return w[r * d + c]; }
  double& W1(std::vector<double>& w, int64_t j, int64_t c) const { return w[e * d + j * e + c]; }

  // z = W2 x, h = GELU(z), y = W1 h, n = N(y); jac [d][d] = ∂N/∂y when requested.
  void Forward(std::vector<double>& w, const std::vector<double>& x, std::vector<double>& z, std::vector<double>& h,
               std::vector<double>& y, std::vector<double>& n, std::vector<std::vector<double>>* jac) const {
    z.assign(e, 0.0);
    h.assign(e, 0.0);
    y.assign(d, 0.0);
    for (int64_t r = 0; r < e; ++r) {
      for (int64_t c = 0; c < d; ++c) z[r] += W2(w, r, c) * x[c];
      h[r] = RefGelu(z[r]);
    }
    for (int64_t j = 0; j < d; ++j) {
      for (int64_t c = 0; c < e; ++c) y[j] += W1(w, j, c) * h[c];
    }
    if (g == nullptr) {
      n = y;
      if (jac != nullptr) {
        jac->assign(d, std::vector<double>(d, 0.0));
        for (int64_t j = 0; j < d; ++j) (*jac)[j][j] = 1.0;
      }
      return;
    }
    double mean = 0, var = 0;
    for (double yj : y) mean += yj / d;
    for (double yj : y) var += (yj - mean) * (yj - mean) / d;
    const double rstd = 1.0 / std::sqrt(var + kEps);
    n.assign(d, 0.0);
    std::vector<double> xh(d);
    for (int64_t j = 0; j < d; ++j) {
      xh[j] = (y[j] - mean) * rstd;
      n[j] = g[j] * xh[j] + b[j];
    }
    if (jac != nullptr) {  // ∂x̂_i/∂y_j = rstd·(δ_ij − 1/d − x̂_i x̂_j / d)
      jac->assign(d, std::vector<double>(d, 0.0));
      for (int64_t i = 0; i < d; ++i) {
        for (int64_t j = 0; j < d; ++j) {
          (*jac)[i][j] = g[i] * rstd * ((i == j ? 1.0 : 0.0) - 1.0 / d - xh[i] * xh[j] / d);
        }
      }
    }
  }

  // M(x) = x + N(W1 GELU(W2 x)).
  std::vector<double> Read(std::vector<double>& w, const std::vector<double>& x) const {
    std::vector<double> z, h, y, n;
    Forward(w, x, z, h, y, n, nullptr);
    for (int64_t j = 0; j < d; ++j) n[j] += x[j];
    return n;
  }

  // The inner objective: DLA ⟨M(k), v⟩; Titans ½‖M(k) − v‖².
  double Objective(std::vector<double>& w, bool titans, const std::vector<double>& k,
                   const std::vector<double>& v) const {
    const std::vector<double> m = Read(w, k);
    double f = 0;
    for (int64_t j = 0; j < d; ++j) f += titans ? 0.5 * (m[j] - v[j]) * (m[j] - v[j]) : m[j] * v[j];
    return f;
  }

  // ∇θ of Objective by the chain rule through the explicit LN Jacobian.
  std::vector<double> Gradient(std::vector<double>& w, bool titans, const std::vector<double>& k,
                               const std::vector<double>& v) const {
    std::vector<double> z, h, y, n;
    std::vector<std::vector<double>> jac;
    Forward(w, k, z, h, y, n, &jac);
    std::vector<double> r(d), dy(d, 0.0), grad(2 * e * d, 0.0);
    for (int64_t i = 0; i < d; ++i) r[i] = titans ? k[i] + n[i] - v[i] : v[i];
    for (int64_t j = 0; j < d; ++j) {
      for (int64_t i = 0; i < d; ++i) dy[j] += jac[i][j] * r[i];
    }
    for (int64_t j = 0; j < d; ++j) {
      for (int64_t c = 0; c < e; ++c) W1(grad, j, c) = dy[j] * h[c];
    }
    for (int64_t c = 0; c < e; ++c) {
      double dh = 0;
      for (int64_t j = 0; j < d; ++j) dh += W1(w, j, c) * dy[j];
      for (int64_t i = 0; i < d; ++i) W2(grad, c, i) = dh * RefGeluGrad(z[c]) * k[i];
    }
    return grad;
  }
};

std::vector<double> Row(const std::vector<float>& x, int64_t row, int64_t n) {
  return std::vector<double>(x.begin() + row * n, x.begin() + (row + 1) * n);
}
std::vector<double> ToDouble(const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); }

// The op's semantics on one sequence in double: out [T, H, d]; the head states [H, P] in place.
std::vector<double> Reference(const Config& c, const Inputs& in, int32_t offset, const Ln& ln,
                              std::vector<double>& memory, std::vector<double>& momentum,
                              std::vector<double>& anchor) {
  const int64_t h = c.heads, d = c.d, p = c.p();
  std::vector<double> out(in.t * h * d);
  for (int64_t hd = 0; hd < h; ++hd) {
    const RefMlp mlp{d, c.e(), c.ln ? ln.w.data() + hd * d : nullptr, c.ln ? ln.b.data() + hd * d : nullptr};
    std::vector<double> w(memory.begin() + hd * p, memory.begin() + (hd + 1) * p);
    std::vector<double> s = c.titans() ? std::vector<double>(momentum.begin() + hd * p, momentum.begin() + (hd + 1) * p)
                                       : std::vector<double>();
    std::vector<double> a = c.chunk > 1 ? std::vector<double>(anchor.begin() + hd * p, anchor.begin() + (hd + 1) * p)
                                        : std::vector<double>();
    for (int64_t t = 0; t < in.t; ++t) {
      const int64_t row = t * h + hd;
      if (c.chunk > 1 && (offset + t) % c.chunk == 0) a = w;
      const std::vector<double> g = mlp.Gradient(c.chunk > 1 ? a : w, c.titans(), Row(in.k, row, d), Row(in.v, row, d));
      const double eta = in.step[row];
      for (int64_t x = 0; x < p; ++x) {
        if (c.titans()) {
          s[x] = in.beta[row] * s[x] - eta * g[x];
          w[x] = in.alpha[row] * w[x] + s[x];
        } else {
          w[x] += eta * g[x];
        }
      }
      const std::vector<double> o = mlp.Read(w, Row(in.q, row, d));
      std::copy(o.begin(), o.end(), out.begin() + row * d);
    }
    std::copy(w.begin(), w.end(), memory.begin() + hd * p);
    if (c.titans()) std::copy(s.begin(), s.end(), momentum.begin() + hd * p);
    if (c.chunk > 1) std::copy(a.begin(), a.end(), anchor.begin() + hd * p);
  }
  return out;
}

// |got − want| ≤ rtol·(1 + max|want|) elementwise.
void ExpectClose(const std::vector<float>& got, const std::vector<double>& want, double rtol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 0;
  for (double w : want) scale = std::max(scale, std::abs(w));
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], rtol * (1.0 + scale)) << what << " at " << i;
  }
}

std::vector<Config> AllConfigs() {
  std::vector<Config> cs;
  for (Rule rule : {Rule::kDla, Rule::kTitans}) {
    for (bool ln : {false, true}) {
      for (int chunk : {1, 3}) {
        Config c;
        c.rule = rule;
        c.ln = ln;
        c.chunk = chunk;
        c.name = std::string(rule == Rule::kDla ? "dla" : "titans") + (ln ? "_ln" : "") + "_b" + std::to_string(chunk);
        cs.push_back(c);
      }
    }
  }
  Config odd{.name = "titans_ln_b2_d6_x2", .rule = Rule::kTitans, .ln = true, .chunk = 2, .d = 6, .expansion = 2};
  cs.push_back(odd);  // d and e not multiples of the 8-lane loops
  return cs;
}

class DeepMemoryRuleTest : public ::testing::TestWithParam<Config> {};

// A whole sequence from non-zero weights (momentum, a stale stored anchor used by the first partial
// inner chunk) matches the double reference: outputs and final states.
TEST_P(DeepMemoryRuleTest, SequenceMatchesReference) {
  const Config& c = GetParam();
  const uint32_t seed = std::hash<std::string>{}(c.name) & 0xffff;
  const int64_t len = 24, slots = 3, slot = 1;
  const int32_t offset = c.chunk > 1 ? 1 : 0;
  const Inputs in = MakeInputs(c, len, seed);
  const Ln ln = MakeLn(c, seed + 10);
  State st = RandomState(c, slots, seed + 20);
  const State init = st;
  cpu::ThreadPool pool(2);
  const std::vector<float> got = RunOp(Context{Device::kCpu, &pool}, c, in, {int32_t(len)}, {slot}, {offset}, ln, st);

  const int64_t per_slot = c.heads * c.p();
  std::vector<double> memory = ToDouble(SliceRows(init.memory, slots, slot, slot + 1));
  std::vector<double> momentum = ToDouble(SliceRows(init.momentum, slots, slot, slot + 1));
  std::vector<double> anchor = ToDouble(SliceRows(init.anchor, slots, slot, slot + 1));
  const std::vector<double> want = Reference(c, in, offset, ln, memory, momentum, anchor);
  ExpectClose(got, want, 2e-5, c.name + " out");
  ExpectClose(SliceRows(st.memory, slots, slot, slot + 1), memory, 2e-5, c.name + " memory");
  if (c.titans()) ExpectClose(SliceRows(st.momentum, slots, slot, slot + 1), momentum, 2e-5, c.name + " momentum");
  if (c.chunk > 1) ExpectClose(SliceRows(st.anchor, slots, slot, slot + 1), anchor, 2e-5, c.name + " anchor");
  // Other slots untouched.
  for (int64_t s : {0, 2}) {
    EXPECT_EQ(SliceRows(st.memory, slots, s, s + 1), SliceRows(init.memory, slots, s, s + 1)) << s;
  }
  EXPECT_EQ(static_cast<int64_t>(st.memory.size()), slots * per_slot);
}

// A varlen batch (scattered slots, an empty sequence, a decode row, different inner offsets) gives
// exactly what each sequence gives alone.
TEST_P(DeepMemoryRuleTest, VarlenBatchMatchesSequencesAlone) {
  const Config& c = GetParam();
  const uint32_t seed = (std::hash<std::string>{}(c.name) & 0xffff) + 7;
  const std::vector<int32_t> lens = {9, 1, 0, 14}, slots = {4, 0, 2, 1};
  const std::vector<int32_t> offsets = c.chunk > 1 ? std::vector<int32_t>{0, c.chunk - 1, 1, 1}
                                                   : std::vector<int32_t>{0, 0, 0, 0};
  const Ln ln = MakeLn(c, seed + 1);
  const State init = RandomState(c, 5, seed + 2);
  Inputs batch;
  std::vector<Inputs> seqs;
  for (size_t i = 0; i < lens.size(); ++i) {
    seqs.push_back(MakeInputs(c, lens[i], seed + 100 * (i + 1)));
    Append(batch, seqs.back());
  }
  cpu::ThreadPool pool(3);
  State st = init;
  const std::vector<float> got = RunOp(Context{Device::kCpu, &pool}, c, batch, lens, slots, offsets, ln, st);
  int64_t row = 0;
  for (size_t i = 0; i < lens.size(); ++i) {
    const int32_t s = slots[i];
    State alone{1, SliceRows(init.memory, 5, s, s + 1), SliceRows(init.momentum, 5, s, s + 1),
                SliceRows(init.anchor, 5, s, s + 1)};
    const std::vector<float> want = RunOp(Context{}, c, seqs[i], {lens[i]}, {0}, {offsets[i]}, ln, alone);
    EXPECT_EQ(SliceRows(got, batch.t, row, row + lens[i]), want) << c.name << " seq " << i;
    EXPECT_EQ(SliceRows(st.memory, 5, s, s + 1), alone.memory) << c.name << " seq " << i;
    EXPECT_EQ(SliceRows(st.momentum, 5, s, s + 1), alone.momentum) << c.name << " seq " << i;
    EXPECT_EQ(SliceRows(st.anchor, 5, s, s + 1), alone.anchor) << c.name << " seq " << i;
    row += lens[i];
  }
  EXPECT_EQ(SliceRows(st.memory, 5, 3, 4), SliceRows(init.memory, 5, 3, 4));
}

INSTANTIATE_TEST_SUITE_P(Rules, DeepMemoryRuleTest, ::testing::ValuesIn(AllConfigs()),
                         [](const ::testing::TestParamInfo<Config>& info) { return info.param.name; });

// One token at η = 1 (Titans: α = 1, β = 0) moves θ by exactly +∇⟨M(k), v⟩ (DLA) or −∇½‖M(k) − v‖²
// (Titans); both gradients by central differences in double. The reference's own gradient is checked
// against the same differences, then o = M_θ'(q) against a double read of the op's new weights.
TEST(DeepMemoryGradient, ClosedFormUpdateEqualsFiniteDifference) {
  for (Rule rule : {Rule::kDla, Rule::kTitans}) {
    for (bool ln : {false, true}) {
      Config c{.rule = rule, .ln = ln, .d = 6, .expansion = 3, .heads = 2};
      const std::string what = std::string(rule == Rule::kDla ? "dla" : "titans") + (ln ? " ln" : "");
      Inputs in = MakeInputs(c, 1, 31);
      std::fill(in.step.begin(), in.step.end(), 1.0f);
      if (c.titans()) {
        std::fill(in.alpha.begin(), in.alpha.end(), 1.0f);
        std::fill(in.beta.begin(), in.beta.end(), 0.0f);
      }
      const Ln ln_p = MakeLn(c, 41);
      State st = RandomState(c, 1, 51);
      const State init = st;
      const std::vector<float> out = RunOp(Context{}, c, in, {1}, {0}, {0}, ln_p, st);
      const int64_t p = c.p(), d = c.d;
      for (int64_t hd = 0; hd < c.heads; ++hd) {
        const RefMlp mlp{d, c.e(), ln ? ln_p.w.data() + hd * d : nullptr, ln ? ln_p.b.data() + hd * d : nullptr};
        std::vector<double> w(init.memory.begin() + hd * p, init.memory.begin() + (hd + 1) * p);
        const std::vector<double> k = Row(in.k, hd, d), v = Row(in.v, hd, d);
        const std::vector<double> grad = mlp.Gradient(w, c.titans(), k, v);
        const double step = 1e-6;
        for (int64_t x = 0; x < p; ++x) {
          std::vector<double> wp = w, wm = w;
          wp[x] += step;
          wm[x] -= step;
          const double fd = (mlp.Objective(wp, c.titans(), k, v) - mlp.Objective(wm, c.titans(), k, v)) / (2 * step);
          ASSERT_NEAR(grad[x], fd, 1e-6 * (1 + std::abs(fd))) << what << " reference, head " << hd << " θ[" << x << "]";
          const double moved = double(st.memory[hd * p + x]) - double(init.memory[hd * p + x]);
          ASSERT_NEAR(moved, c.titans() ? -fd : fd, 2e-6 * (1 + std::abs(fd)))
              << what << " op, head " << hd << " θ[" << x << "]";
        }
        std::vector<double> w_new(st.memory.begin() + hd * p, st.memory.begin() + (hd + 1) * p);
        const std::vector<double> o = mlp.Read(w_new, Row(in.q, hd, d));
        for (int64_t j = 0; j < d; ++j) EXPECT_NEAR(out[hd * d + j], o[j], 1e-5) << what << " out " << j;
      }
    }
  }
}

// Spec B.12 #8: a Titans step at a small η (α = 1, no momentum) lowers ½‖M(k) − v‖² on that token.
TEST(DeepMemoryGradient, TitansStepReducesLoss) {
  for (bool ln : {false, true}) {
    Config c{.rule = Rule::kTitans, .ln = ln, .heads = 1};
    Inputs in = MakeInputs(c, 1, 61);
    in.step = {0.05f};
    in.alpha = {1.0f};
    in.beta = {0.0f};
    const Ln ln_p = MakeLn(c, 62);
    State st = RandomState(c, 1, 63);
    const RefMlp mlp{c.d, c.e(), ln ? ln_p.w.data() : nullptr, ln ? ln_p.b.data() : nullptr};
    std::vector<double> before = ToDouble(st.memory);
    const double loss0 = mlp.Objective(before, true, ToDouble(in.k), ToDouble(in.v));
    RunOp(Context{}, c, in, {1}, {0}, {0}, ln_p, st);
    std::vector<double> after = ToDouble(st.memory);
    const double loss1 = mlp.Objective(after, true, ToDouble(in.k), ToDouble(in.v));
    EXPECT_GT(loss0, 0.0);
    EXPECT_LT(loss1, loss0 * 0.99) << (ln ? "ln" : "no ln");
  }
}

// b = 4: one sequence of 30 tokens in one call, against the same tokens split into calls at arbitrary
// points, each passing inner_offset = its first token's index mod 4 — and a wrong offset differs.
TEST(DeepMemoryInnerChunks, SplitCallsMatchOneCall) {
  for (Rule rule : {Rule::kDla, Rule::kTitans}) {
    for (bool ln : {false, true}) {
      Config c{.rule = rule, .ln = ln, .chunk = 4};
      const std::string what = std::string(rule == Rule::kDla ? "dla" : "titans") + (ln ? " ln" : "");
      const int64_t len = 30;
      const int32_t offset0 = 3;
      const Inputs in = MakeInputs(c, len, 71);
      const Ln ln_p = MakeLn(c, 72);
      const State init = RandomState(c, 2, 73);
      cpu::ThreadPool pool(2);
      const Context ctx{Device::kCpu, &pool};
      State whole_st = init;
      const std::vector<float> whole = RunOp(ctx, c, in, {int32_t(len)}, {1}, {offset0}, ln_p, whole_st);
      for (const std::vector<int64_t>& cuts : {std::vector<int64_t>{5, 6, 15, 17, 30}, {1, 2, 3, 4, 9, 22, 30}}) {
        State st = init;
        std::vector<float> got;
        int64_t t0 = 0;
        for (int64_t t1 : cuts) {
          const int32_t off = static_cast<int32_t>((offset0 + t0) % c.chunk);
          const std::vector<float> y =
              RunOp(ctx, c, Slice(in, t0, t1), {int32_t(t1 - t0)}, {1}, {off}, ln_p, st);
          got.insert(got.end(), y.begin(), y.end());
          t0 = t1;
        }
        // The same math, but the anchor's forward/backward runs as sgemm or GEMV loops depending on
        // how many tokens of a chunk one call holds: equal up to fp32 rounding.
        ExpectClose(got, ToDouble(whole), 1e-5, what + " out");
        ExpectClose(st.memory, ToDouble(whole_st.memory), 1e-5, what + " memory");
        ExpectClose(st.anchor, ToDouble(whole_st.anchor), 1e-5, what + " anchor");
        if (c.titans()) ExpectClose(st.momentum, ToDouble(whole_st.momentum), 1e-5, what + " momentum");
      }
      State wrong = init;
      const std::vector<float> shifted = RunOp(ctx, c, in, {int32_t(len)}, {1}, {0}, ln_p, wrong);
      double diff = 0;
      for (size_t i = 0; i < shifted.size(); ++i) diff = std::max(diff, double(std::abs(shifted[i] - whole[i])));
      EXPECT_GT(diff, 1e-4) << what << ": inner_offset has no effect";
    }
  }
}

// sum[s] += memory[s] for the listed slots only.
TEST(DeepMemoryAccumulate, AddsListedSlots) {
  const int64_t slots = 4, h = 2, p = 64;
  const std::vector<float> memory = RandomVector(slots * h * p, 81), sum0 = RandomVector(slots * h * p, 82);
  Tensor mem = F32(memory, {slots, h, p}), sum = F32(sum0, {slots, h, p}), ids = I32({3, 0});
  cpu::ThreadPool pool(2);
  ASSERT_TRUE(DeepMemoryAccumulate(Context{Device::kCpu, &pool}, {.memory = &mem, .slot_ids = &ids, .sum = &sum}).ok());
  const std::vector<float> got = *sum.ToHostF32();
  for (int64_t x = 0; x < slots * h * p; ++x) {
    const int64_t s = x / (h * p);
    EXPECT_EQ(got[x], (s == 3 || s == 0) ? sum0[x] + memory[x] : sum0[x]) << x;
  }
  Tensor dup = I32({1, 1}), oob = I32({4}), wrong = *Tensor::Zeros(DType::kF32, {slots, h, p + 1}, Device::kCpu);
  for (auto [args, name] : {std::pair{DeepMemoryAccumulateArgs{&mem, &dup, &sum}, "slot_ids"},
                            {DeepMemoryAccumulateArgs{&mem, &oob, &sum}, "slot_ids"},
                            {DeepMemoryAccumulateArgs{&mem, &ids, &wrong}, "sum"},
                            {DeepMemoryAccumulateArgs{&mem, &ids, &mem}, "sum"},
                            {DeepMemoryAccumulateArgs{nullptr, &ids, &sum}, "memory"}}) {
    const absl::Status s = DeepMemoryAccumulate(Context{}, args);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find(name), std::string::npos) << s;
  }
}

}  // namespace
}  // namespace mcserve::kernels
