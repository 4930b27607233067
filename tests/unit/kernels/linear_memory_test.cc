// LinearMemory against double-precision references of every rule: chunk invariance, varlen batches
// with scattered slots, GQA/GVA head mapping, known values, and bad inputs.
#include "kernels/linear_memory/linear_memory.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/linear_memory/linear_memory_math.h"

namespace mcserve::kernels {
namespace {

using Rule = LinearMemoryRule;

struct Config {
  std::string name;
  Rule rule = Rule::kAdditive;
  int64_t hq = 2, hk = 2, hv = 2;
  bool key_decay = false;  // kAdditive: GLA per-key-channel decay
  bool decay = false;      // kGatedDelta: optional decay (always on for swla / titans)
  bool normalize = false;  // kAdditive
  int64_t hs() const { return std::max({hq, hk, hv}); }
  bool uses_decay() const { return decay || rule == Rule::kSwla || rule == Rule::kTitans; }
  bool uses_beta() const { return rule != Rule::kAdditive; }
  bool uses_gamma() const { return rule == Rule::kSwla || rule == Rule::kTitans; }
  bool uses_aux() const { return normalize || rule == Rule::kSwla || rule == Rule::kTitans; }
};

void PrintTo(const Config& c, std::ostream* os) { *os << c.name; }

constexpr int64_t kK = 16, kV = 24;

// Per-head aux elements.
int64_t AuxPerHead(const Config& c) {
  if (c.rule == Rule::kSwla) return kK + kV;
  if (c.rule == Rule::kTitans) return kK * kV;
  return kK;
}
Shape AuxShape(const Config& c, int64_t slots) {
  if (c.rule == Rule::kSwla) return {slots, c.hs(), kK + kV};
  if (c.rule == Rule::kTitans) return {slots, c.hs(), kK, kV};
  return {slots, c.hs(), kK};
}

// Row-major inputs of T tokens.
struct Inputs {
  int64_t t = 0;
  std::vector<float> q, k, v, key_decay, decay, beta, gamma;
};

float Uniform(std::mt19937& rng, float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(rng); }

void FillL2Normed(std::vector<float>& dst, int64_t rows, int64_t n, std::mt19937& rng) {
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    std::vector<float> row(n);
    for (float& x : row) {
      x = Uniform(rng, -1, 1);
      ss += double(x) * x;
    }
    for (float x : row) dst.push_back(static_cast<float>(x / std::sqrt(ss)));
  }
}

Inputs MakeInputs(const Config& c, int64_t t, std::mt19937& rng) {
  Inputs in;
  in.t = t;
  const int64_t hs = c.hs();
  if (c.rule == Rule::kAdditive) {
    // Linear attention takes feature-mapped (non-negative when normalised) q, k.
    const float lo = c.normalize ? 0.0f : -1.0f;
    for (int64_t i = 0; i < t * c.hq * kK; ++i) in.q.push_back(Uniform(rng, lo, 1) * 0.25f);
    for (int64_t i = 0; i < t * c.hk * kK; ++i) in.k.push_back(Uniform(rng, lo, 1) * 0.25f);
  } else {
    FillL2Normed(in.q, t * c.hq, kK, rng);
    FillL2Normed(in.k, t * c.hk, kK, rng);
  }
  for (int64_t i = 0; i < t * c.hv * kV; ++i) in.v.push_back(Uniform(rng, -1, 1));
  if (c.key_decay) {
    for (int64_t i = 0; i < t * c.hk * kK; ++i) in.key_decay.push_back(Uniform(rng, 0.8f, 1.0f));
  }
  if (c.uses_decay()) {
    for (int64_t i = 0; i < t * hs; ++i) in.decay.push_back(Uniform(rng, 0.8f, 1.0f));
  }
  if (c.uses_beta()) {
    for (int64_t i = 0; i < t * hs; ++i) in.beta.push_back(Uniform(rng, 0.0f, c.rule == Rule::kTitans ? 0.5f : 1.0f));
  }
  if (c.uses_gamma()) {
    for (int64_t i = 0; i < t * hs; ++i) in.gamma.push_back(Uniform(rng, 0.0f, 1.0f));
  }
  return in;
}

std::vector<float> SliceRows(const std::vector<float>& x, int64_t t, int64_t r0, int64_t r1) {
  if (x.empty()) return x;
  const int64_t row = static_cast<int64_t>(x.size()) / t;
  return std::vector<float>(x.begin() + r0 * row, x.begin() + r1 * row);
}

Inputs Slice(const Inputs& in, int64_t r0, int64_t r1) {
  Inputs s;
  s.t = r1 - r0;
  s.q = SliceRows(in.q, in.t, r0, r1);
  s.k = SliceRows(in.k, in.t, r0, r1);
  s.v = SliceRows(in.v, in.t, r0, r1);
  s.key_decay = SliceRows(in.key_decay, in.t, r0, r1);
  s.decay = SliceRows(in.decay, in.t, r0, r1);
  s.beta = SliceRows(in.beta, in.t, r0, r1);
  s.gamma = SliceRows(in.gamma, in.t, r0, r1);
  return s;
}

void Append(Inputs& dst, const Inputs& src) {
  dst.t += src.t;
  auto cat = [](std::vector<float>& a, const std::vector<float>& b) { a.insert(a.end(), b.begin(), b.end()); };
  cat(dst.q, src.q);
  cat(dst.k, src.k);
  cat(dst.v, src.v);
  cat(dst.key_decay, src.key_decay);
  cat(dst.decay, src.decay);
  cat(dst.beta, src.beta);
  cat(dst.gamma, src.gamma);
}

Tensor F32(const std::vector<float>& v, Shape shape) { return *Tensor::FromHost(v, std::move(shape), Device::kCpu); }
Tensor I32(const std::vector<int32_t>& v) {
  return *Tensor::FromHostI32(v, {static_cast<int64_t>(v.size())}, Device::kCpu);
}

// Runs the kernel over `in` with the given layout; returns out [T, Hs, V].
std::vector<float> RunKernel(const Context& ctx, const Config& c, const Inputs& in, const std::vector<int32_t>& cu,
                             const std::vector<int32_t>& slot_ids, Tensor& state, Tensor* aux) {
  const int64_t t = in.t, hs = c.hs();
  Tensor q = F32(in.q, {t, c.hq, kK}), k = F32(in.k, {t, c.hk, kK}), v = F32(in.v, {t, c.hv, kV});
  Tensor kdec = c.key_decay ? F32(in.key_decay, {t, c.hk, kK}) : Tensor();
  Tensor dec = c.uses_decay() ? F32(in.decay, {t, hs}) : Tensor();
  Tensor beta = c.uses_beta() ? F32(in.beta, {t, hs}) : Tensor();
  Tensor gamma = c.uses_gamma() ? F32(in.gamma, {t, hs}) : Tensor();
  Tensor cut = I32(cu), slt = I32(slot_ids);
  Tensor out = *Tensor::Zeros(DType::kF32, {t, hs, kV}, Device::kCpu);
  LinearMemoryArgs a;
  a.rule = c.rule;
  a.q = &q;
  a.k = &k;
  a.v = &v;
  if (c.key_decay) a.key_decay = &kdec;
  if (c.uses_decay()) a.decay = &dec;
  if (c.uses_beta()) a.beta = &beta;
  if (c.uses_gamma()) a.gamma = &gamma;
  a.normalize = c.normalize;
  a.layout = {&cut, &slt};
  a.state = &state;
  a.aux = aux;
  a.out = &out;
  absl::Status s = LinearMemory(ctx, a);
  EXPECT_TRUE(s.ok()) << s;
  return *out.ToHostF32();
}

// Double-precision reference for one sequence; state [Hs, K, V] and aux [Hs, aux] updated in place.
std::vector<double> Reference(const Config& c, const Inputs& in, std::vector<double>& state, std::vector<double>& aux) {
  const int64_t hs = c.hs();
  std::vector<double> out(in.t * hs * kV, 0.0);
  for (int64_t t = 0; t < in.t; ++t) {
    for (int64_t h = 0; h < hs; ++h) {
      const int64_t qh = h * c.hq / hs, kh = h * c.hk / hs, vh = h * c.hv / hs;
      auto q = [&](int64_t i) { return double(in.q[(t * c.hq + qh) * kK + i]); };
      auto k = [&](int64_t i) { return double(in.k[(t * c.hk + kh) * kK + i]); };
      auto v = [&](int64_t j) { return double(in.v[(t * c.hv + vh) * kV + j]); };
      auto S = [&](int64_t i, int64_t j) -> double& { return state[(h * kK + i) * kV + j]; };
      double* A = aux.empty() ? nullptr : aux.data() + h * AuxPerHead(c);
      const double alpha = c.uses_decay() ? in.decay[t * hs + h] : 1.0;
      const double beta = c.uses_beta() ? in.beta[t * hs + h] : 0.0;
      const double gamma = c.uses_gamma() ? in.gamma[t * hs + h] : 0.0;
      switch (c.rule) {
        case Rule::kAdditive:
          for (int64_t i = 0; i < kK; ++i) {
            const double a = c.key_decay ? in.key_decay[(t * c.hk + kh) * kK + i] : 1.0;
            for (int64_t j = 0; j < kV; ++j) S(i, j) = a * S(i, j) + k(i) * v(j);
          }
          break;
        case Rule::kGatedDelta: {
          std::vector<double> pred(kV, 0.0);
          for (int64_t i = 0; i < kK; ++i)
            for (int64_t j = 0; j < kV; ++j) pred[j] += alpha * S(i, j) * k(i);
          for (int64_t i = 0; i < kK; ++i)
            for (int64_t j = 0; j < kV; ++j) S(i, j) = alpha * S(i, j) + k(i) * beta * (v(j) - pred[j]);
          break;
        }
        case Rule::kSwla:
          for (int64_t i = 0; i < kK; ++i)
            for (int64_t j = 0; j < kV; ++j) S(i, j) = alpha * S(i, j) + beta * A[i] * A[kK + j] + gamma * k(i) * v(j);
          for (int64_t i = 0; i < kK; ++i) A[i] = k(i);
          for (int64_t j = 0; j < kV; ++j) A[kK + j] = v(j);
          break;
        case Rule::kTitans: {
          std::vector<double> err(kV, 0.0);
          for (int64_t j = 0; j < kV; ++j) {
            for (int64_t i = 0; i < kK; ++i) err[j] += S(i, j) * k(i);
            err[j] -= v(j);
          }
          for (int64_t i = 0; i < kK; ++i) {
            for (int64_t j = 0; j < kV; ++j) {
              double& m = A[i * kV + j];
              m = gamma * m - beta * k(i) * err[j];
              S(i, j) = alpha * S(i, j) + m;
            }
          }
          break;
        }
      }
      double denom = 1.0;
      if (c.normalize) {
        double qz = 0;
        for (int64_t i = 0; i < kK; ++i) {
          A[i] += k(i);
          qz += q(i) * A[i];
        }
        denom = qz + 1e-10;
      }
      for (int64_t j = 0; j < kV; ++j) {
        double o = 0;
        for (int64_t i = 0; i < kK; ++i) o += q(i) * S(i, j);
        out[(t * hs + h) * kV + j] = o / denom;
      }
    }
  }
  return out;
}

std::vector<double> ToDouble(const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); }

void ExpectClose(const std::vector<float>& got, const std::vector<double>& want, double rtol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 0;
  for (double w : want) scale = std::max(scale, std::abs(w));
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], rtol * (1.0 + scale)) << what << " at " << i;
  }
}

std::vector<float> RandomState(int64_t n, std::mt19937& rng, float lo, float hi) {
  std::vector<float> x(n);
  for (float& v : x) v = Uniform(rng, lo, hi);
  return x;
}

std::vector<Config> AllConfigs() {
  std::vector<Config> cs;
  auto add = [&](std::string name, Rule r, int64_t hq, int64_t hk, int64_t hv, bool kdec, bool dec, bool norm) {
    Config c;
    c.name = std::move(name);
    c.rule = r;
    c.hq = hq;
    c.hk = hk;
    c.hv = hv;
    c.key_decay = kdec;
    c.decay = dec;
    c.normalize = norm;
    cs.push_back(c);
  };
  add("linear_attn", Rule::kAdditive, 2, 2, 2, false, false, false);
  add("linear_attn_normalize", Rule::kAdditive, 2, 2, 2, false, false, true);
  add("linear_attn_gqa", Rule::kAdditive, 4, 2, 2, false, false, false);
  add("linear_attn_gqa_normalize", Rule::kAdditive, 4, 1, 1, false, false, true);
  add("gla", Rule::kAdditive, 2, 2, 2, true, false, false);
  add("gla_gqa", Rule::kAdditive, 4, 2, 2, true, false, false);
  add("gla_gva", Rule::kAdditive, 2, 2, 4, true, false, false);
  add("delta_net", Rule::kGatedDelta, 2, 2, 2, false, false, false);
  add("gated_delta", Rule::kGatedDelta, 2, 2, 2, false, true, false);
  add("gated_delta_gva", Rule::kGatedDelta, 2, 2, 4, false, true, false);
  add("gated_delta_gqa", Rule::kGatedDelta, 4, 2, 2, false, true, false);
  add("swla", Rule::kSwla, 2, 2, 2, false, true, false);
  add("swla_gva", Rule::kSwla, 1, 1, 2, false, true, false);
  add("titans", Rule::kTitans, 2, 2, 2, false, true, false);
  add("titans_gqa", Rule::kTitans, 4, 2, 4, false, true, false);
  return cs;
}

class LinearMemoryRuleTest : public ::testing::TestWithParam<Config> {};

// One call over the whole sequence matches the reference; chunks of 1, 7 and 64 through the state
// give the same outputs and final state as that one call.
TEST_P(LinearMemoryRuleTest, ChunksMatchWholeSequenceAndReference) {
  const Config& c = GetParam();
  std::mt19937 rng(std::hash<std::string>{}(c.name) & 0xffff);
  const int64_t len = 100, slots = 3, slot = 2, hs = c.hs();
  Inputs in = MakeInputs(c, len, rng);
  cpu::ThreadPool pool(2);
  Context ctx{Device::kCpu, &pool};

  Tensor state = *Tensor::Zeros(DType::kF32, {slots, hs, kK, kV}, Device::kCpu);
  std::optional<Tensor> aux;
  if (c.uses_aux()) aux = *Tensor::Zeros(DType::kF32, AuxShape(c, slots), Device::kCpu);
  std::vector<float> whole = RunKernel(ctx, c, in, {0, static_cast<int32_t>(len)}, {slot}, state,
                                       aux ? &*aux : nullptr);
  std::vector<double> ref_state(hs * kK * kV, 0.0), ref_aux(c.uses_aux() ? hs * AuxPerHead(c) : 0, 0.0);
  std::vector<double> want = Reference(c, in, ref_state, ref_aux);
  ExpectClose(whole, want, 2e-5, c.name + " out");
  std::vector<float> st = *state.ToHostF32();
  ExpectClose(SliceRows(st, slots, slot, slot + 1), ref_state, 2e-5, c.name + " state");
  if (aux) ExpectClose(SliceRows(*aux->ToHostF32(), slots, slot, slot + 1), ref_aux, 2e-5, c.name + " aux");

  for (int64_t chunk : {1, 7, 64}) {
    Tensor cstate = *Tensor::Zeros(DType::kF32, {slots, hs, kK, kV}, Device::kCpu);
    std::optional<Tensor> caux;
    if (c.uses_aux()) caux = *Tensor::Zeros(DType::kF32, AuxShape(c, slots), Device::kCpu);
    std::vector<float> got;
    for (int64_t t0 = 0; t0 < len; t0 += chunk) {
      const int64_t t1 = std::min(len, t0 + chunk);
      std::vector<float> y = RunKernel(ctx, c, Slice(in, t0, t1), {0, static_cast<int32_t>(t1 - t0)}, {slot}, cstate,
                                       caux ? &*caux : nullptr);
      got.insert(got.end(), y.begin(), y.end());
    }
    // The same sequential per-token arithmetic: bitwise equal.
    EXPECT_EQ(got, whole) << c.name << " chunk " << chunk;
    EXPECT_EQ(*cstate.ToHostF32(), st) << c.name << " chunk " << chunk;
    if (aux) {
      EXPECT_EQ(*caux->ToHostF32(), *aux->ToHostF32()) << c.name << " chunk " << chunk;
    }
  }
}

// A varlen batch with scattered slots and non-zero starting states equals each sequence run alone;
// slots outside the batch are untouched.
TEST_P(LinearMemoryRuleTest, VarlenBatchMatchesSequencesAlone) {
  const Config& c = GetParam();
  std::mt19937 rng((std::hash<std::string>{}(c.name) & 0xffff) + 7);
  const int64_t slots = 7, hs = c.hs();
  const std::vector<int32_t> lens = {13, 1, 0, 40};
  const std::vector<int32_t> slot_ids = {5, 0, 3, 1};
  const int64_t state_per_slot = hs * kK * kV, aux_per_slot = hs * AuxPerHead(c);
  // Non-negative z for the normaliser; anything for the other aux kinds.
  std::vector<float> init_state = RandomState(slots * state_per_slot, rng, -0.5f, 0.5f);
  std::vector<float> init_aux =
      c.uses_aux() ? RandomState(slots * aux_per_slot, rng, c.normalize ? 0.0f : -0.5f, 0.5f) : std::vector<float>();
  Inputs batch;
  std::vector<Inputs> seqs;
  std::vector<int32_t> cu = {0};
  for (int32_t l : lens) {
    seqs.push_back(MakeInputs(c, l, rng));
    Append(batch, seqs.back());
    cu.push_back(cu.back() + l);
  }
  cpu::ThreadPool pool(2);
  Context ctx{Device::kCpu, &pool};
  Tensor state = F32(init_state, {slots, hs, kK, kV});
  std::optional<Tensor> aux;
  if (c.uses_aux()) aux = F32(init_aux, AuxShape(c, slots));
  std::vector<float> got = RunKernel(ctx, c, batch, cu, slot_ids, state, aux ? &*aux : nullptr);
  std::vector<float> st = *state.ToHostF32();
  std::vector<float> ax = aux ? *aux->ToHostF32() : std::vector<float>();

  Context serial{Device::kCpu, nullptr};
  for (size_t b = 0; b < lens.size(); ++b) {
    const int32_t s = slot_ids[b];
    const std::string what = c.name + " seq " + std::to_string(b);
    std::vector<float> s0 = SliceRows(init_state, slots, s, s + 1);
    std::vector<float> a0 = SliceRows(init_aux, slots, s, s + 1);
    Tensor alone_state = F32(s0, {1, hs, kK, kV});
    std::optional<Tensor> alone_aux;
    if (c.uses_aux()) alone_aux = F32(a0, AuxShape(c, 1));
    std::vector<float> alone =
        RunKernel(serial, c, seqs[b], {0, lens[b]}, {0}, alone_state, alone_aux ? &*alone_aux : nullptr);
    EXPECT_EQ(SliceRows(got, batch.t, cu[b], cu[b + 1]), alone) << what;
    EXPECT_EQ(SliceRows(st, slots, s, s + 1), *alone_state.ToHostF32()) << what;
    if (aux) {
      EXPECT_EQ(SliceRows(ax, slots, s, s + 1), *alone_aux->ToHostF32()) << what;
    }
    std::vector<double> rs = ToDouble(s0), ra = ToDouble(a0);
    std::vector<double> want = Reference(c, seqs[b], rs, ra);
    ExpectClose(alone, want, 2e-5, what);
    ExpectClose(*alone_state.ToHostF32(), rs, 2e-5, what + " state");
  }
  for (int32_t s : {2, 4, 6}) {
    EXPECT_EQ(SliceRows(st, slots, s, s + 1), SliceRows(init_state, slots, s, s + 1)) << "slot " << s;
    if (aux) {
      EXPECT_EQ(SliceRows(ax, slots, s, s + 1), SliceRows(init_aux, slots, s, s + 1)) << "slot " << s;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Rules, LinearMemoryRuleTest, ::testing::ValuesIn(AllConfigs()),
                         [](const ::testing::TestParamInfo<Config>& info) { return info.param.name; });

// Delta rule with β = 1 and a unit key stores v exactly under k: Sᵀk = v after the write.
TEST(LinearMemoryKnownValues, DeltaRuleWithUnitBetaStoresValue) {
  std::mt19937 rng(3);
  std::vector<float> S = RandomState(kK * kV, rng, -1, 1), q(kK), k, v = RandomState(kV, rng, -1, 1), o(kV),
                     scratch(kV), read(kV);
  FillL2Normed(k, 1, kK, rng);
  q = k;
  GatedDeltaStep(S.data(), q.data(), k.data(), v.data(), 0.7f, 1.0f, kK, kV, o.data(), scratch.data());
  ReadOut(S.data(), k.data(), kK, kV, read.data());
  for (int64_t j = 0; j < kV; ++j) {
    EXPECT_NEAR(read[j], v[j], 1e-5f);
    EXPECT_NEAR(o[j], v[j], 1e-5f);  // q = k reads the value back
  }
}

// One Titans step at a small θ (α = 1, no momentum) lowers this token's loss ‖Sᵀk − v‖².
TEST(LinearMemoryKnownValues, TitansStepReducesLoss) {
  std::mt19937 rng(4);
  std::vector<float> S = RandomState(kK * kV, rng, -1, 1), M(kK * kV, 0.0f), k, v = RandomState(kV, rng, -1, 1),
                     o(kV), scratch(kV), pred(kV);
  FillL2Normed(k, 1, kK, rng);
  auto loss = [&] {
    ReadOut(S.data(), k.data(), kK, kV, pred.data());
    double l = 0;
    for (int64_t j = 0; j < kV; ++j) l += (double(pred[j]) - v[j]) * (double(pred[j]) - v[j]);
    return l;
  };
  const double before = loss();
  TitansStep(S.data(), M.data(), k.data(), k.data(), v.data(), 1.0f, 0.1f, 0.9f, kK, kV, o.data(), scratch.data());
  const double after = loss();
  EXPECT_GT(before, 0.0);
  // With |k| = 1 the error shrinks by exactly (1 − θ): loss × 0.81.
  EXPECT_NEAR(after, before * 0.81, 1e-4 * before);
}

// Normalised linear attention with a single token and q = k returns v · |k|² / (|k|² + 1e-10) ≈ v.
TEST(LinearMemoryKnownValues, NormalizedSingleTokenReturnsValue) {
  std::vector<float> S(kK * kV, 0.0f), z(kK, 0.0f), k(kK, 0.5f), v(kV), o(kV);
  for (int64_t j = 0; j < kV; ++j) v[j] = static_cast<float>(j) - 3.0f;
  AdditiveStep(S.data(), k.data(), k.data(), v.data(), nullptr, kK, kV, o.data());
  NormalizeStep(z.data(), k.data(), k.data(), kK, kV, o.data());
  for (int64_t j = 0; j < kV; ++j) EXPECT_NEAR(o[j], v[j], 1e-5f);
}

// Shapes, per-rule tensors and layouts that must be rejected.
TEST(LinearMemoryValidation, BadInputsAreInvalidArgument) {
  Context ctx;
  const int64_t t = 3, slots = 2;
  auto zeros = [](Shape s) { return *Tensor::Zeros(DType::kF32, std::move(s), Device::kCpu); };
  Tensor q = zeros({t, 2, kK}), k = zeros({t, 2, kK}), v = zeros({t, 2, kV});
  Tensor q3 = zeros({t, 3, kK}), k_badk = zeros({t, 2, kK + 1}), v_rows = zeros({t + 1, 2, kV}), q2d = zeros({t, 2 * kK});
  Tensor gate = zeros({t, 2}), gate_bad = zeros({t, 3}), kdec = zeros({t, 2, kK}), kdec_bad = zeros({t, 2, kV});
  Tensor state = zeros({slots, 2, kK, kV}), state_bad = zeros({slots, 2, kV, kK}), state_heads = zeros({slots, 4, kK, kV});
  Tensor z = zeros({slots, 2, kK}), prev = zeros({slots, 2, kK + kV}), mom = zeros({slots, 2, kK, kV});
  Tensor out = zeros({t, 2, kV}), out_bad = zeros({t, 2, kK});
  Tensor qi32 = *Tensor::Zeros(DType::kI32, {t, 2, kK}, Device::kCpu);
  Tensor cu = I32({0, 1, 3}), slot_ids = I32({1, 0}), cu_short = I32({0, 1, 2}), slots_oob = I32({1, 2});
  Tensor slots_dup = I32({0, 0});
  auto base = [&](Rule r) {
    LinearMemoryArgs a;
    a.rule = r;
    a.q = &q;
    a.k = &k;
    a.v = &v;
    a.layout = {&cu, &slot_ids};
    a.state = &state;
    a.out = &out;
    if (r != Rule::kAdditive) a.beta = &gate;
    if (r == Rule::kSwla || r == Rule::kTitans) {
      a.decay = &gate;
      a.gamma = &gate;
    }
    if (r == Rule::kSwla) a.aux = &prev;
    if (r == Rule::kTitans) a.aux = &mom;
    return a;
  };
  for (Rule r : {Rule::kAdditive, Rule::kGatedDelta, Rule::kSwla, Rule::kTitans}) {
    ASSERT_TRUE(LinearMemory(ctx, base(r)).ok()) << static_cast<int>(r);
  }
  {
    auto a = base(Rule::kAdditive);
    a.normalize = true;
    a.aux = &z;
    a.key_decay = &kdec;
    ASSERT_TRUE(LinearMemory(ctx, a).ok());
  }
  std::vector<std::pair<std::string, LinearMemoryArgs>> bad;
  auto add = [&](std::string name, Rule r, auto mutate) {
    LinearMemoryArgs a = base(r);
    mutate(a);
    bad.emplace_back(std::move(name), a);
  };
  add("null q", Rule::kAdditive, [&](auto& a) { a.q = nullptr; });
  add("null state", Rule::kAdditive, [&](auto& a) { a.state = nullptr; });
  add("null out", Rule::kAdditive, [&](auto& a) { a.out = nullptr; });
  add("q rank", Rule::kAdditive, [&](auto& a) { a.q = &q2d; });
  add("q dtype", Rule::kAdditive, [&](auto& a) { a.q = &qi32; });
  add("Hq=3 does not divide Hs", Rule::kAdditive, [&](auto& a) { a.q = &q3; });
  add("k dim", Rule::kAdditive, [&](auto& a) { a.k = &k_badk; });
  add("v rows", Rule::kAdditive, [&](auto& a) { a.v = &v_rows; });
  add("state transposed", Rule::kAdditive, [&](auto& a) { a.state = &state_bad; });
  add("state heads", Rule::kAdditive, [&](auto& a) { a.state = &state_heads; });
  add("out dim", Rule::kAdditive, [&](auto& a) { a.out = &out_bad; });
  add("normalize without aux", Rule::kAdditive, [&](auto& a) { a.normalize = true; });
  add("normalize aux shape", Rule::kAdditive, [&](auto& a) { a.normalize = true; a.aux = &prev; });
  add("aux without normalize", Rule::kAdditive, [&](auto& a) { a.aux = &z; });
  add("key_decay shape", Rule::kAdditive, [&](auto& a) { a.key_decay = &kdec_bad; });
  add("additive with decay", Rule::kAdditive, [&](auto& a) { a.decay = &gate; });
  add("delta without beta", Rule::kGatedDelta, [&](auto& a) { a.beta = nullptr; });
  add("delta beta shape", Rule::kGatedDelta, [&](auto& a) { a.beta = &gate_bad; });
  add("delta decay shape", Rule::kGatedDelta, [&](auto& a) { a.decay = &gate_bad; });
  add("delta with key_decay", Rule::kGatedDelta, [&](auto& a) { a.key_decay = &kdec; });
  add("delta normalize", Rule::kGatedDelta, [&](auto& a) { a.normalize = true; a.aux = &z; });
  add("swla without aux", Rule::kSwla, [&](auto& a) { a.aux = nullptr; });
  add("swla aux shape", Rule::kSwla, [&](auto& a) { a.aux = &z; });
  add("swla without gamma", Rule::kSwla, [&](auto& a) { a.gamma = nullptr; });
  add("swla without decay", Rule::kSwla, [&](auto& a) { a.decay = nullptr; });
  add("titans without aux", Rule::kTitans, [&](auto& a) { a.aux = nullptr; });
  add("titans aux shape", Rule::kTitans, [&](auto& a) { a.aux = &prev; });
  add("titans without beta", Rule::kTitans, [&](auto& a) { a.beta = nullptr; });
  add("layout rows", Rule::kAdditive, [&](auto& a) { a.layout.cu_seqlens = &cu_short; });
  add("layout slot out of range", Rule::kAdditive, [&](auto& a) { a.layout.slot_ids = &slots_oob; });
  add("layout duplicate slot", Rule::kAdditive, [&](auto& a) { a.layout.slot_ids = &slots_dup; });
  add("layout missing", Rule::kAdditive, [&](auto& a) { a.layout.cu_seqlens = nullptr; });
  add("unknown rule", Rule::kAdditive, [&](auto& a) { a.rule = static_cast<Rule>(42); });
  for (const auto& [name, a] : bad) {
    absl::Status s = LinearMemory(ctx, a);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << name << ": " << s;
  }
}

}  // namespace
}  // namespace mcserve::kernels
