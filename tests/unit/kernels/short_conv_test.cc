// ShortConv against a double-precision reference: chunk invariance, varlen batches, bad inputs.
#include "kernels/short_conv/short_conv.h"

#include <cmath>
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/thread_pool.h"

namespace mcserve::kernels {
namespace {

std::vector<float> RandomVec(size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

Tensor F32(const std::vector<float>& v, Shape shape) { return *Tensor::FromHost(v, std::move(shape), Device::kCpu); }
Tensor I32(const std::vector<int32_t>& v) {
  return *Tensor::FromHostI32(v, {static_cast<int64_t>(v.size())}, Device::kCpu);
}

// Reference for one sequence: x [L, D] with history hist [W−1, D] (oldest first); returns y and
// updates hist.
std::vector<float> Reference(const std::vector<float>& x, int64_t d, const std::vector<float>& w, int width,
                             const std::vector<float>* bias, bool silu, std::vector<float>& hist) {
  const int64_t len = static_cast<int64_t>(x.size()) / d;
  std::vector<double> all;  // history ++ x, [W−1 + L, D]
  for (float v : hist) all.push_back(v);
  for (float v : x) all.push_back(v);
  std::vector<float> y(len * d);
  for (int64_t t = 0; t < len; ++t) {
    for (int64_t c = 0; c < d; ++c) {
      double acc = bias ? (*bias)[c] : 0.0;
      for (int j = 0; j < width; ++j) acc += double(w[c * width + j]) * all[(t + j) * d + c];
      if (silu) acc = acc / (1.0 + std::exp(-acc));
      y[t * d + c] = static_cast<float>(acc);
    }
  }
  const int64_t total = width - 1 + len;
  for (int64_t i = 0; i < width - 1; ++i) {
    for (int64_t c = 0; c < d; ++c) hist[i * d + c] = static_cast<float>(all[(total - (width - 1) + i) * d + c]);
  }
  return y;
}

struct ConvSetup {
  int64_t d = 70;  // not a multiple of the channel block
  int width = 4;
  int64_t slots = 5;
  std::vector<float> w, bias;
};

// Runs ShortConv over rows x with the given layout on state; returns out.
std::vector<float> RunConv(const Context& ctx, const ConvSetup& s, const std::vector<float>& x,
                       const std::vector<int32_t>& cu, const std::vector<int32_t>& slot_ids, Tensor& state,
                       bool with_bias, bool silu) {
  const int64_t t = static_cast<int64_t>(x.size()) / s.d;
  Tensor xt = F32(x, {t, s.d});
  Tensor wt = F32(s.w, {s.d, 1, s.width});
  Tensor bt = F32(s.bias, {s.d});
  Tensor cut = I32(cu), slt = I32(slot_ids);
  Tensor out = *Tensor::Zeros(DType::kF32, {t, s.d}, Device::kCpu);
  ShortConvArgs a;
  a.x = &xt;
  a.weight = &wt;
  a.bias = with_bias ? &bt : nullptr;
  a.silu = silu;
  a.layout = {&cut, &slt};
  a.state = &state;
  a.out = &out;
  absl::Status st = ShortConv(ctx, a);
  EXPECT_TRUE(st.ok()) << st;
  return *out.ToHostF32();
}

ConvSetup MakeSetup(std::mt19937& rng, int width) {
  ConvSetup s;
  s.width = width;
  s.w = RandomVec(s.d * width, rng);
  s.bias = RandomVec(s.d, rng);
  return s;
}

void ExpectNear(const std::vector<float>& a, const std::vector<float>& b, float tol) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], tol) << "at " << i;
}

class ShortConvTest : public ::testing::TestWithParam<int> {};

TEST_P(ShortConvTest, ChunksMatchReference) {
  const int width = GetParam();
  std::mt19937 rng(1234 + width);
  ConvSetup s = MakeSetup(rng, width);
  cpu::ThreadPool pool(2);
  Context ctx{Device::kCpu, &pool};
  const int64_t len = 150;
  std::vector<float> x = RandomVec(len * s.d, rng);
  for (bool silu : {true, false}) {
    for (bool with_bias : {true, false}) {
      std::vector<float> hist(s.d * (width - 1), 0.0f);
      std::vector<float> want = Reference(x, s.d, s.w, width, with_bias ? &s.bias : nullptr, silu, hist);
      for (int64_t chunk : {int64_t{1}, int64_t{2}, int64_t{7}, int64_t{64}, len}) {
        Tensor state = *Tensor::Zeros(DType::kF32, {s.slots, int64_t{width} - 1, s.d}, Device::kCpu);
        std::vector<float> got;
        for (int64_t t0 = 0; t0 < len; t0 += chunk) {
          const int64_t n = std::min(chunk, len - t0);
          std::vector<float> xc(x.begin() + t0 * s.d, x.begin() + (t0 + n) * s.d);
          std::vector<float> y = RunConv(ctx, s, xc, {0, static_cast<int32_t>(n)}, {3}, state, with_bias, silu);
          got.insert(got.end(), y.begin(), y.end());
        }
        ExpectNear(got, want, 1e-5f);
        std::vector<float> st = *state.ToHostF32();
        std::vector<float> slot3(st.begin() + 3 * (width - 1) * s.d, st.begin() + 4 * (width - 1) * s.d);
        ExpectNear(slot3, hist, 0.0f);
      }
    }
  }
}

TEST_P(ShortConvTest, VarlenBatchMatchesSequencesAlone) {
  const int width = GetParam();
  std::mt19937 rng(99 + width);
  ConvSetup s = MakeSetup(rng, width);
  Context ctx{Device::kCpu, nullptr};
  cpu::ThreadPool pool(2);
  Context pctx{Device::kCpu, &pool};
  // 100 tokens × 70 channels: enough for the batch to run on the pool (the kernel threads from 4K pairs).
  const std::vector<int32_t> lens = {37, 1, 0, 2, 61};
  const std::vector<int32_t> slot_ids = {4, 0, 1, 2, 3};  // slot order differs from sequence order
  const int64_t hist_n = (width - 1) * s.d;
  std::vector<float> init = RandomVec(s.slots * hist_n, rng);  // non-trivial history in every slot
  std::vector<int32_t> cu = {0};
  std::vector<float> x;
  for (int32_t l : lens) {
    cu.push_back(cu.back() + l);
    std::vector<float> xs = RandomVec(l * s.d, rng);
    x.insert(x.end(), xs.begin(), xs.end());
  }
  // Sequence set without slot 1's sequence: exclude seq 2 (len 0) is still included; drop seq 1 to
  // leave slot 0 untouched.
  std::vector<int32_t> cu2 = {0}, slots2;
  std::vector<float> x2;
  for (size_t b = 0; b < lens.size(); ++b) {
    if (b == 1) continue;
    cu2.push_back(cu2.back() + lens[b]);
    slots2.push_back(slot_ids[b]);
    x2.insert(x2.end(), x.begin() + cu[b] * s.d, x.begin() + cu[b + 1] * s.d);
  }
  Tensor state = F32(init, {s.slots, int64_t{width} - 1, s.d});
  std::vector<float> got = RunConv(pctx, s, x2, cu2, slots2, state, true, true);
  std::vector<float> st = *state.ToHostF32();
  size_t row = 0;
  for (size_t b = 0; b < lens.size(); ++b) {
    if (b == 1) continue;
    std::vector<float> xs(x.begin() + cu[b] * s.d, x.begin() + cu[b + 1] * s.d);
    // Each sequence alone through the kernel, with one slot.
    Tensor alone = F32(std::vector<float>(init.begin() + slot_ids[b] * hist_n, init.begin() + (slot_ids[b] + 1) * hist_n),
                       {1, int64_t{width} - 1, s.d});
    std::vector<float> y = RunConv(ctx, s, xs, {0, lens[b]}, {0}, alone, true, true);
    std::vector<float> got_b(got.begin() + row * s.d, got.begin() + (row + lens[b]) * s.d);
    ExpectNear(got_b, y, 0.0f);
    std::vector<float> hist(init.begin() + slot_ids[b] * hist_n, init.begin() + (slot_ids[b] + 1) * hist_n);
    std::vector<float> want = Reference(xs, s.d, s.w, width, &s.bias, true, hist);
    ExpectNear(got_b, want, 1e-5f);
    ExpectNear(std::vector<float>(st.begin() + slot_ids[b] * hist_n, st.begin() + (slot_ids[b] + 1) * hist_n), hist,
               0.0f);
    row += lens[b];
  }
  // Slot 0 (sequence 1 was left out of the batch) is untouched.
  ExpectNear(std::vector<float>(st.begin(), st.begin() + hist_n), std::vector<float>(init.begin(), init.begin() + hist_n),
             0.0f);
}

INSTANTIATE_TEST_SUITE_P(Widths, ShortConvTest, ::testing::Values(1, 2, 4));

TEST(ShortConvWeights, Bf16AndF16WeightsAreWidened) {
  std::mt19937 rng(5);
  const int64_t d = 8;
  const int width = 3;
  // Values exactly representable in both half formats: multiples of 1/8 in [-2, 2].
  std::vector<float> w(d * width);
  std::vector<uint16_t> bf(d * width), hf(d * width);
  for (size_t i = 0; i < w.size(); ++i) {
    w[i] = static_cast<float>(static_cast<int>(rng() % 33) - 16) / 8.0f;
    bf[i] = F32ToBf16(w[i]);
    // f16 of a multiple of 1/8 with |x| <= 2: encode via float bits.
    uint32_t u;
    std::memcpy(&u, &w[i], 4);
    const uint32_t sign = (u >> 16) & 0x8000u;
    const int exp = static_cast<int>((u >> 23) & 0xff) - 127 + 15;
    hf[i] = w[i] == 0.0f ? static_cast<uint16_t>(sign) : static_cast<uint16_t>(sign | (exp << 10) | ((u >> 13) & 0x3ffu));
  }
  std::vector<float> x = RandomVec(6 * d, rng);
  Context ctx;
  std::vector<std::vector<float>> outs;
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16}) {
    Tensor wt = dt == DType::kF32  ? F32(w, {d, 1, width})
                : dt == DType::kBF16 ? Tensor::WrapHost(bf.data(), dt, {d, 1, width}, nullptr)
                                     : Tensor::WrapHost(hf.data(), dt, {d, 1, width}, nullptr);
    Tensor xt = F32(x, {6, d});
    Tensor cut = I32({0, 6}), slt = I32({0});
    Tensor state = *Tensor::Zeros(DType::kF32, {1, width - 1, d}, Device::kCpu);
    Tensor out = *Tensor::Zeros(DType::kF32, {6, d}, Device::kCpu);
    ShortConvArgs a;
    a.x = &xt;
    a.weight = &wt;
    a.layout = {&cut, &slt};
    a.state = &state;
    a.out = &out;
    ASSERT_TRUE(ShortConv(ctx, a).ok());
    outs.push_back(*out.ToHostF32());
  }
  std::vector<float> hist(d * (width - 1), 0.0f);
  ExpectNear(outs[0], Reference(x, d, w, width, nullptr, true, hist), 1e-5f);
  ExpectNear(outs[1], outs[0], 0.0f);
  ExpectNear(outs[2], outs[0], 0.0f);
}

TEST(ShortConvValidation, BadInputsAreInvalidArgument) {
  const int64_t d = 4, t = 3;
  const int width = 3;
  Tensor x = *Tensor::Zeros(DType::kF32, {t, d}, Device::kCpu);
  Tensor w = *Tensor::Zeros(DType::kF32, {d, 1, width}, Device::kCpu);
  Tensor bias = *Tensor::Zeros(DType::kF32, {d}, Device::kCpu);
  Tensor state = *Tensor::Zeros(DType::kF32, {2, width - 1, d}, Device::kCpu);
  Tensor out = *Tensor::Zeros(DType::kF32, {t, d}, Device::kCpu);
  Tensor cu = I32({0, 1, 3}), slots = I32({1, 0});
  auto base = [&] {
    ShortConvArgs a;
    a.x = &x;
    a.weight = &w;
    a.bias = &bias;
    a.layout = {&cu, &slots};
    a.state = &state;
    a.out = &out;
    return a;
  };
  Context ctx;
  ASSERT_TRUE(ShortConv(ctx, base()).ok());

  Tensor w_bad = *Tensor::Zeros(DType::kF32, {d, 2, width}, Device::kCpu);
  Tensor w_i32 = *Tensor::Zeros(DType::kI32, {d, 1, width}, Device::kCpu);
  Tensor bias_bad = *Tensor::Zeros(DType::kF32, {d + 1}, Device::kCpu);
  Tensor state_bad = *Tensor::Zeros(DType::kF32, {2, width, d}, Device::kCpu);
  Tensor out_bad = *Tensor::Zeros(DType::kF32, {t + 1, d}, Device::kCpu);
  Tensor x_rank = *Tensor::Zeros(DType::kF32, {t, d, 1}, Device::kCpu);
  Tensor cu_bad = I32({0, 1, 2}), cu_dec = I32({0, 2, 1}), slots_dup = I32({1, 1}), slots_oob = I32({0, 2});
  std::vector<ShortConvArgs> bad;
  { auto a = base(); a.x = nullptr; bad.push_back(a); }
  { auto a = base(); a.x = &x_rank; bad.push_back(a); }
  { auto a = base(); a.weight = &w_bad; bad.push_back(a); }
  { auto a = base(); a.weight = &w_i32; bad.push_back(a); }
  { auto a = base(); a.bias = &bias_bad; bad.push_back(a); }
  { auto a = base(); a.state = &state_bad; bad.push_back(a); }
  { auto a = base(); a.state = nullptr; bad.push_back(a); }
  { auto a = base(); a.out = &out_bad; bad.push_back(a); }
  { auto a = base(); a.out = &x; bad.push_back(a); }  // aliases x
  { auto a = base(); a.layout.cu_seqlens = &cu_bad; bad.push_back(a); }
  { auto a = base(); a.layout.cu_seqlens = &cu_dec; bad.push_back(a); }
  { auto a = base(); a.layout.slot_ids = &slots_dup; bad.push_back(a); }
  { auto a = base(); a.layout.slot_ids = &slots_oob; bad.push_back(a); }
  { auto a = base(); a.layout.slot_ids = nullptr; bad.push_back(a); }
  for (size_t i = 0; i < bad.size(); ++i) {
    EXPECT_EQ(ShortConv(ctx, bad[i]).code(), absl::StatusCode::kInvalidArgument) << "case " << i;
  }
}

}  // namespace
}  // namespace mcserve::kernels
