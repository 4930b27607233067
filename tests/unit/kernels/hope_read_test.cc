// HopeRead (kernels/hope_read) on the CPU against a double-precision host model of the read
// y = q + W1 σ(W2 q), q = L2(SiLU(conv)): the forward value, and the backward against central finite
// differences of ⟨dy, y(q~)⟩ (only the current conv tap depends on q~). Both activations, K = 1 and 4,
// and the raw read y = x + W1 σ(W2 x) (query false) of weights at an offset in a longer row.
// Tolerance: float32 kernel vs double, 2e-4 relative (+2e-5).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "kernels/hope_read/hope_read.h"
#include "tests/unit/kernels/random_inputs.h"

namespace mcserve::kernels {
namespace {

struct Case {
  int64_t n, h, d, e, k;
  HopeActivation act;
  bool query = true;             // false: a raw read y = x + W1 σ(W2 x)
  int64_t offset = 0, row = 0;   // W2's offset in each head's memory row of `row` floats
  std::vector<float> q, win, conv, mem, dy;
};

double Act(HopeActivation a, double z) {
  return a == HopeActivation::kGelu ? 0.5 * z * (1 + std::erf(z / std::sqrt(2.0))) : z / (1 + std::exp(-z));
}

// y [d] of row r, head hh for pre-query qh [d] (double).
std::vector<double> ReadRef(const Case& c, int64_t r, int64_t hh, const std::vector<double>& qh) {
  const int64_t d = c.d, e = c.e, hd = c.h * d;
  std::vector<double> s(d), y(d);
  double ss = 0;
  for (int64_t j = 0; j < d && !c.query; ++j) s[j] = qh[j];
  for (int64_t j = 0; j < d && c.query; ++j) {
    const int64_t ch = hh * d + j;
    double p = c.conv[ch * c.k + c.k - 1] * qh[j];
    for (int64_t i = 0; i + 1 < c.k; ++i) p += c.conv[ch * c.k + i] * c.win[(r * (c.k - 1) + i) * hd + ch];
    s[j] = p / (1 + std::exp(-p));
    ss += s[j] * s[j];
  }
  for (double& v : s) v /= c.query ? std::sqrt(ss + 1e-6) : 1.0;
  const float* w = c.mem.data() + (r * c.h + hh) * c.row + c.offset;
  for (int64_t j = 0; j < d; ++j) y[j] = s[j];
  for (int64_t rr = 0; rr < e; ++rr) {
    double z = 0;
    for (int64_t j = 0; j < d; ++j) z += w[rr * d + j] * s[j];
    const double a = Act(c.act, z);
    for (int64_t j = 0; j < d; ++j) y[j] += w[e * d + j * e + rr] * a;
  }
  return y;
}

std::vector<float> RunRead(const Case& c, bool backward) {
  const Device cpu = Device::kCpu;
  Tensor q = *Tensor::FromHost(c.q, {c.n, c.h, c.d}, cpu), conv = *Tensor::FromHost(c.conv, {c.h * c.d, 1, c.k}, cpu);
  Tensor mem = *Tensor::FromHost(c.mem, {c.n, c.h, c.row}, cpu), dy = *Tensor::FromHost(c.dy, {c.n, c.h, c.d}, cpu);
  Tensor out = *Tensor::Zeros(DType::kF32, {c.n, c.h, c.d}, cpu);
  std::optional<Tensor> win;
  if (c.k > 1 && c.query) win = *Tensor::FromHost(c.win, {c.n, c.k - 1, c.h * c.d}, cpu);
  const absl::Status s = HopeRead(Context{.device = cpu},
                                  {.activation = c.act, .expansion = static_cast<int>(c.e / c.d), .query = c.query,
                                   .q_pre = &q, .window = win ? &*win : nullptr, .q_conv = c.query ? &conv : nullptr,
                                   .memory = &mem, .weights_offset = c.offset, .dy = backward ? &dy : nullptr,
                                   .out = &out});
  EXPECT_TRUE(s.ok()) << s;
  return *out.ToHostF32();
}

TEST(HopeReadTest, ForwardAndBackwardMatchDoubleReference) {
  for (int64_t k : {0, 1, 4}) {  // 0: a raw read (no query path) at an offset in a longer row
    for (HopeActivation act : {HopeActivation::kSilu, HopeActivation::kGelu}) {
      Case c{.n = 2, .h = 2, .d = 4, .e = 8, .k = std::max<int64_t>(k, 1), .act = act, .query = k > 0};
      c.offset = c.query ? 0 : 13;
      c.row = c.offset + 2 * c.e * c.d + (c.query ? 0 : 5);
      c.q = RandomVector(c.n * c.h * c.d, 1 + k, -2, 2);
      c.win = RandomVector(c.n * (c.k - 1) * c.h * c.d, 2, -2, 2);
      c.conv = RandomVector(c.h * c.d * c.k, 3);
      c.mem = RandomVector(c.n * c.h * c.row, 4, -0.6f, 0.6f);
      c.dy = RandomVector(c.n * c.h * c.d, 5);
      const std::vector<float> y = RunRead(c, false), dq = RunRead(c, true);
      for (int64_t r = 0; r < c.n; ++r) {
        for (int64_t hh = 0; hh < c.h; ++hh) {
          const int64_t base = (r * c.h + hh) * c.d;
          std::vector<double> qh(c.q.begin() + base, c.q.begin() + base + c.d);
          const std::vector<double> want = ReadRef(c, r, hh, qh);
          for (int64_t j = 0; j < c.d; ++j) ASSERT_NEAR(y[base + j], want[j], 2e-4 * std::fabs(want[j]) + 2e-5);
          for (int64_t j = 0; j < c.d; ++j) {
            const double keep = qh[j], step = 1e-3;
            double f[2];
            for (int sgn = 0; sgn < 2; ++sgn) {
              qh[j] = keep + (sgn == 0 ? step : -step);
              const std::vector<double> yy = ReadRef(c, r, hh, qh);
              f[sgn] = 0;
              for (int64_t i = 0; i < c.d; ++i) f[sgn] += c.dy[base + i] * yy[i];
            }
            qh[j] = keep;
            const double g = (f[0] - f[1]) / (2 * step);
            ASSERT_NEAR(dq[base + j], g, 2e-4 * std::fabs(g) + 2e-5) << "k " << k << " at " << base + j;
          }
        }
      }
    }
  }
}

TEST(HopeReadTest, RejectsBadShapes) {
  const Device cpu = Device::kCpu;
  Tensor q = *Tensor::Zeros(DType::kF32, {1, 2, 4}, cpu), conv = *Tensor::Zeros(DType::kF32, {8, 1, 3}, cpu);
  Tensor mem = *Tensor::Zeros(DType::kF32, {1, 2, 64}, cpu), out = *Tensor::Zeros(DType::kF32, {1, 2, 4}, cpu);
  const Context ctx{.device = cpu};
  // K = 3 needs a window.
  EXPECT_EQ(HopeRead(ctx, {.q_pre = &q, .q_conv = &conv, .memory = &mem, .out = &out}).code(),
            absl::StatusCode::kInvalidArgument);
  Tensor win = *Tensor::Zeros(DType::kF32, {1, 2, 8}, cpu);
  EXPECT_TRUE(HopeRead(ctx, {.q_pre = &q, .window = &win, .q_conv = &conv, .memory = &mem, .out = &out}).ok());
  Tensor small = *Tensor::Zeros(DType::kF32, {1, 2, 63}, cpu);
  EXPECT_EQ(HopeRead(ctx, {.q_pre = &q, .window = &win, .q_conv = &conv, .memory = &small, .out = &out}).code(),
            absl::StatusCode::kInvalidArgument);
  // A raw read takes no conv, and its weights must fit after the offset.
  EXPECT_EQ(HopeRead(ctx, {.query = false, .q_pre = &q, .q_conv = &conv, .memory = &mem, .out = &out}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(HopeRead(ctx, {.query = false, .q_pre = &q, .memory = &mem, .out = &out}).ok());
  EXPECT_EQ(HopeRead(ctx, {.query = false, .q_pre = &q, .memory = &mem, .weights_offset = 1, .out = &out}).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mcserve::kernels
