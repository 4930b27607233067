// FeatureMap against double-precision references written from fla/modules/feature_map.py.
#include "kernels/feature_map/feature_map.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/thread_pool.h"

namespace mcserve::kernels {
namespace {

using Vec = std::vector<double>;

std::vector<float> RandomVec(size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

Tensor F32(const std::vector<float>& v, Shape shape) { return *Tensor::FromHost(v, std::move(shape), Device::kCpu); }

// nn.Linear: y = W x + b, W [n, d].
Vec LinearRef(const std::vector<float>& w, const std::vector<float>* b, const Vec& x) {
  const size_t d = x.size(), n = w.size() / d;
  Vec y(n);
  for (size_t i = 0; i < n; ++i) {
    double acc = b ? (*b)[i] : 0.0;
    for (size_t j = 0; j < d; ++j) acc += double(w[i * d + j]) * x[j];
    y[i] = acc;
  }
  return y;
}

Vec Concat(const Vec& a, const Vec& b) {
  Vec c = a;
  c.insert(c.end(), b.begin(), b.end());
  return c;
}

// torch.roll(p, shifts=j, dims=-1).
Vec Roll(const Vec& p, int j) {
  const int n = static_cast<int>(p.size());
  Vec r(n);
  for (int i = 0; i < n; ++i) r[(i + j) % n] = p[i];
  return r;
}

struct Params {
  std::vector<float> w1, b1, w2, b2;
  bool bias = true;
};

// One row of φ(x) as fla computes it.
Vec Reference(FeatureMapKind kind, const Vec& x, const Params& p) {
  const std::vector<float>* b1 = p.bias ? &p.b1 : nullptr;
  const std::vector<float>* b2 = p.bias ? &p.b2 : nullptr;
  Vec y;
  switch (kind) {
    case FeatureMapKind::kIdentity:
      return x;
    case FeatureMapKind::kElu:
      for (double v : x) y.push_back(v > 0 ? v + 1.0 : std::exp(v));  // F.elu(x) + 1
      return y;
    case FeatureMapKind::kRelu:
      for (double v : x) y.push_back(std::max(v, 0.0));
      return y;
    case FeatureMapKind::kHadamard: {
      Vec a = LinearRef(p.w1, b1, x), b = LinearRef(p.w2, b2, x);
      for (size_t i = 0; i < a.size(); ++i) y.push_back(a[i] * b[i]);
      return y;
    }
    case FeatureMapKind::kHedgehog: {
      Vec l = LinearRef(p.w1, b1, x), pos, neg;
      for (double v : l) {
        pos.push_back(2 * v);
        neg.push_back(-2 * v);
      }
      Vec c = Concat(pos, neg);
      double sum = 0;
      for (double v : c) sum += std::exp(v);
      for (double v : c) y.push_back(std::exp(v) / sum);
      return y;
    }
    case FeatureMapKind::kT2R:
      for (double v : LinearRef(p.w1, b1, x)) y.push_back(std::max(v, 0.0));
      return y;
    case FeatureMapKind::kDpfp:
    case FeatureMapKind::kDpfp3: {
      const int nu = kind == FeatureMapKind::kDpfp ? 4 : 3;
      Vec pos, neg;
      for (double v : x) {
        pos.push_back(std::max(v, 0.0));
        neg.push_back(std::max(-v, 0.0));
      }
      Vec pcat = Concat(pos, neg), rolled, repeat;
      for (int j = 1; j <= nu; ++j) rolled = Concat(rolled, Roll(pcat, j));
      for (int j = 0; j < nu; ++j) repeat = Concat(repeat, pcat);
      for (size_t i = 0; i < rolled.size(); ++i) y.push_back(repeat[i] * rolled[i]);
      return y;
    }
  }
  return y;
}

bool HasLayer1(FeatureMapKind k) {
  return k == FeatureMapKind::kHadamard || k == FeatureMapKind::kHedgehog || k == FeatureMapKind::kT2R;
}

absl::StatusOr<std::vector<float>> RunMap(const Context& ctx, FeatureMapKind kind, const std::vector<float>& x,
                                          int64_t t, int64_t h, int64_t d, const Params& p) {
  Tensor xt = F32(x, {t, h, d});
  auto sized = [](std::vector<float> v, int64_t n) {  // parameter-free kinds may pass none
    v.resize(n);
    return v;
  };
  Tensor w1 = F32(sized(p.w1, d * d), {d, d}), b1 = F32(sized(p.b1, d), {d});
  Tensor w2 = F32(sized(p.w2, d * d), {d, d}), b2 = F32(sized(p.b2, d), {d});
  Tensor out = *Tensor::Zeros(DType::kF32, {t, h, FeatureMapOutDim(kind, d)}, Device::kCpu);
  FeatureMapArgs a;
  a.kind = kind;
  a.x = &xt;
  if (HasLayer1(kind)) {
    a.w1 = &w1;
    a.b1 = p.bias ? &b1 : nullptr;
  }
  if (kind == FeatureMapKind::kHadamard) {
    a.w2 = &w2;
    a.b2 = p.bias ? &b2 : nullptr;
  }
  a.out = &out;
  if (absl::Status s = FeatureMap(ctx, a); !s.ok()) return s;
  return out.ToHostF32();
}

const FeatureMapKind kAllKinds[] = {FeatureMapKind::kIdentity, FeatureMapKind::kElu,  FeatureMapKind::kRelu,
                                    FeatureMapKind::kHadamard, FeatureMapKind::kHedgehog, FeatureMapKind::kT2R,
                                    FeatureMapKind::kDpfp, FeatureMapKind::kDpfp3};

TEST(FeatureMapTest, OutDims) {
  EXPECT_EQ(FeatureMapOutDim(FeatureMapKind::kIdentity, 16), 16);
  EXPECT_EQ(FeatureMapOutDim(FeatureMapKind::kHadamard, 16), 16);
  EXPECT_EQ(FeatureMapOutDim(FeatureMapKind::kT2R, 16), 16);
  EXPECT_EQ(FeatureMapOutDim(FeatureMapKind::kHedgehog, 16), 32);
  EXPECT_EQ(FeatureMapOutDim(FeatureMapKind::kDpfp, 16), 128);
  EXPECT_EQ(FeatureMapOutDim(FeatureMapKind::kDpfp3, 16), 96);
}

TEST(FeatureMapTest, EveryKindMatchesReference) {
  cpu::ThreadPool pool(2);
  for (const Context& ctx : {Context{Device::kCpu, nullptr}, Context{Device::kCpu, &pool}}) {
    for (FeatureMapKind kind : kAllKinds) {
      for (bool bias : {true, false}) {
        std::mt19937 rng(static_cast<int>(kind) * 10 + bias);
        const int64_t t = 5, h = 3, d = 20;
        Params p;
        p.bias = bias;
        p.w1 = RandomVec(d * d, rng, 0.5f);
        p.w2 = RandomVec(d * d, rng, 0.5f);
        p.b1 = RandomVec(d, rng);
        p.b2 = RandomVec(d, rng);
        std::vector<float> x = RandomVec(t * h * d, rng, 2.0f);
        auto got = RunMap(ctx, kind, x, t, h, d, p);
        ASSERT_TRUE(got.ok()) << got.status();
        const int64_t od = FeatureMapOutDim(kind, d);
        ASSERT_EQ(got->size(), static_cast<size_t>(t * h * od));
        for (int64_t r = 0; r < t * h; ++r) {
          Vec xr(x.begin() + r * d, x.begin() + (r + 1) * d);
          Vec want = Reference(kind, xr, p);
          ASSERT_EQ(want.size(), static_cast<size_t>(od));
          for (int64_t i = 0; i < od; ++i) {
            ASSERT_NEAR((*got)[r * od + i], want[i], 1e-5 * (1 + std::abs(want[i])))
                << "kind " << static_cast<int>(kind) << " bias " << bias << " row " << r << " i " << i;
          }
        }
      }
    }
  }
}

TEST(FeatureMapTest, KnownValues) {
  Context ctx;
  Params p;
  // DPFP of x = [1, −2]: p = [1, 0, 0, 2]; rolls by 1..4 give [2,1,0,0], [0,2,1,0], [0,0,2,1], p.
  auto dpfp = RunMap(ctx, FeatureMapKind::kDpfp, {1.0f, -2.0f}, 1, 1, 2, p);
  ASSERT_TRUE(dpfp.ok());
  EXPECT_EQ(*dpfp, (std::vector<float>{2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 1, 0, 0, 4}));
  // DPFP-3 (ARMT): the first three of those rolls, in the same order.
  auto dpfp3 = RunMap(ctx, FeatureMapKind::kDpfp3, {1.0f, -2.0f}, 1, 1, 2, p);
  ASSERT_TRUE(dpfp3.ok());
  EXPECT_EQ(*dpfp3, (std::vector<float>{2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2}));
  // Hedgehog with W = 1, b = 0, x = ln(2)/2: softmax([ln 2, −ln 2]) = [0.8, 0.2].
  p.w1 = {1.0f};
  p.b1 = {0.0f};
  p.w2 = {0.0f};
  p.b2 = {0.0f};
  auto hh = RunMap(ctx, FeatureMapKind::kHedgehog, {0.5f * std::log(2.0f)}, 1, 1, 1, p);
  ASSERT_TRUE(hh.ok());
  EXPECT_NEAR((*hh)[0], 0.8f, 1e-6f);
  EXPECT_NEAR((*hh)[1], 0.2f, 1e-6f);
  // Hedgehog is a softmax: large inputs stay finite and sum to one.
  auto big = RunMap(ctx, FeatureMapKind::kHedgehog, {200.0f}, 1, 1, 1, p);
  ASSERT_TRUE(big.ok());
  EXPECT_NEAR((*big)[0], 1.0f, 1e-6f);
  EXPECT_EQ((*big)[1], 0.0f);
}

TEST(FeatureMapTest, Bf16WeightsAndInPlace) {
  Context ctx;
  const int64_t d = 4;
  std::vector<float> w(d * d);
  std::vector<uint16_t> wb(d * d);
  for (int64_t i = 0; i < d * d; ++i) {
    w[i] = static_cast<float>(i % 5 - 2) * 0.25f;  // exact in bf16
    wb[i] = F32ToBf16(w[i]);
  }
  std::vector<float> x = {0.5f, -1.0f, 2.0f, 0.25f, 1.0f, 1.5f, -0.5f, 0.0f};
  Tensor xt = F32(x, {2, 1, d}), wf = F32(w, {d, d});
  Tensor wbt = Tensor::WrapHost(wb.data(), DType::kBF16, {d, d}, nullptr);
  Tensor out_f = *Tensor::Zeros(DType::kF32, {2, 1, d}, Device::kCpu);
  FeatureMapArgs a;
  a.kind = FeatureMapKind::kHadamard;
  a.x = &xt;
  a.w1 = &wf;
  a.w2 = &wf;
  a.out = &out_f;
  ASSERT_TRUE(FeatureMap(ctx, a).ok());
  a.w1 = &wbt;
  a.w2 = &wbt;
  a.out = &xt;  // in place
  ASSERT_TRUE(FeatureMap(ctx, a).ok());
  EXPECT_EQ(*xt.ToHostF32(), *out_f.ToHostF32());
  Params p;
  p.w1 = w;
  p.w2 = w;
  p.bias = false;
  std::vector<float> want = *out_f.ToHostF32();
  Vec ref = Reference(FeatureMapKind::kHadamard, Vec(x.begin(), x.begin() + d), p);
  for (int64_t i = 0; i < d; ++i) EXPECT_NEAR(want[i], ref[i], 1e-6);
}

TEST(FeatureMapTest, BadInputsAreInvalidArgument) {
  Context ctx;
  const int64_t t = 2, h = 2, d = 3;
  Tensor x = *Tensor::Zeros(DType::kF32, {t, h, d}, Device::kCpu);
  Tensor x2d = *Tensor::Zeros(DType::kF32, {t, h * d}, Device::kCpu);
  Tensor w = *Tensor::Zeros(DType::kF32, {d, d}, Device::kCpu);
  Tensor w_bad = *Tensor::Zeros(DType::kF32, {d, d + 1}, Device::kCpu);
  Tensor w_i32 = *Tensor::Zeros(DType::kI32, {d, d}, Device::kCpu);
  Tensor b = *Tensor::Zeros(DType::kF32, {d}, Device::kCpu);
  Tensor b_bad = *Tensor::Zeros(DType::kF32, {d + 1}, Device::kCpu);
  Tensor out = *Tensor::Zeros(DType::kF32, {t, h, d}, Device::kCpu);
  Tensor out2 = *Tensor::Zeros(DType::kF32, {t, h, 2 * d}, Device::kCpu);
  auto make = [&](FeatureMapKind kind, const Tensor* x_, const Tensor* w1, const Tensor* b1, const Tensor* w2,
                  const Tensor* b2, Tensor* o) {
    FeatureMapArgs a;
    a.kind = kind;
    a.x = x_;
    a.w1 = w1;
    a.b1 = b1;
    a.w2 = w2;
    a.b2 = b2;
    a.out = o;
    return a;
  };
  ASSERT_TRUE(FeatureMap(ctx, make(FeatureMapKind::kHadamard, &x, &w, &b, &w, &b, &out)).ok());
  ASSERT_TRUE(FeatureMap(ctx, make(FeatureMapKind::kHedgehog, &x, &w, &b, nullptr, nullptr, &out2)).ok());
  const FeatureMapArgs bad[] = {
      make(FeatureMapKind::kHadamard, &x, &w, &b, nullptr, &b, &out),       // missing w2
      make(FeatureMapKind::kHadamard, &x, nullptr, &b, &w, &b, &out),       // missing w1
      make(FeatureMapKind::kT2R, &x, nullptr, nullptr, nullptr, nullptr, &out),
      make(FeatureMapKind::kHedgehog, &x, &w, &b, nullptr, nullptr, &out),  // out dim d, want 2d
      make(FeatureMapKind::kDpfp, &x, nullptr, nullptr, nullptr, nullptr, &out2),
      make(FeatureMapKind::kT2R, &x, &w_bad, nullptr, nullptr, nullptr, &out),
      make(FeatureMapKind::kT2R, &x, &w_i32, nullptr, nullptr, nullptr, &out),
      make(FeatureMapKind::kT2R, &x, &w, &b_bad, nullptr, nullptr, &out),
      make(FeatureMapKind::kT2R, &x, &w, nullptr, &w, nullptr, &out),       // w2 not used by T2R
      make(FeatureMapKind::kElu, &x, &w, nullptr, nullptr, nullptr, &out),  // w1 not used by elu
      make(FeatureMapKind::kElu, &x2d, nullptr, nullptr, nullptr, nullptr, &out),
      make(FeatureMapKind::kElu, nullptr, nullptr, nullptr, nullptr, nullptr, &out),
      make(FeatureMapKind::kElu, &x, nullptr, nullptr, nullptr, nullptr, nullptr),
      make(static_cast<FeatureMapKind>(99), &x, nullptr, nullptr, nullptr, nullptr, &out),
  };
  for (size_t i = 0; i < std::size(bad); ++i) {
    EXPECT_EQ(FeatureMap(ctx, bad[i]).code(), absl::StatusCode::kInvalidArgument) << "case " << i;
  }
}

}  // namespace
}  // namespace mcserve::kernels
