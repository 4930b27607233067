// Linear's decode GEMV kernel (m ≤ 8; m = 9 takes the runtime Gemm) on the CUDA emulator against
// the CPU backend: F32/BF16/F16 weights read as stored, m = 1..9, k = 0, 1, 31, 33, 64, 256, 257,
// 512 (1 to 32 lanes per row, element-wise and 16-byte-vector paths, tails that are not a multiple
// of the lane count or vector width), n = 1, 45 (a partial last block of warps), accumulate on and off, both emulator schedules
// bit-identical; small-integer inputs (every partial sum exact) must match the CPU and the exact
// answer bit for bit; misaligned views of x and w (the element-wise fallback) as well.
//
// Tolerance vs the CPU for random inputs: both accumulate exact FMA products in F32, in different
// orders — the CPU in 8-wide AVX chains of ≤ k/8 + 8 additions plus a 3-step horizontal sum, the
// GEMV in per-lane chains of ≤ max(16, k/32) + 8 additions (its rows get 16 elements per lane up to
// a warp) plus a ≤ 5-step shuffle tree — so each is within (chain length)·u·Σ_k|x·w| of the exact
// sum (u = 2⁻²⁴), their difference within u·(k/4 + 48)·Σ|x·w|; accumulating adds one rounding of
// out + s on each side, 2u·|out|. For m = 9 (OpenBLAS on both sides, blocking unknown) the chain
// bound is k: u·(2k + 48)·Σ|x·w| + 2u·|out|.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/core/dtype.h"
#include "kernels/core/tensor.h"
#include "kernels/linear/linear.h"
#include "tests/unit/kernels/emu_test_util.h"
#include "tests/unit/kernels/param_printers.h"

namespace mcserve::kernels {
namespace {

// The device under test: cuda-emu, or cuda with MCSERVE_TEST_DEVICE=cuda (emu_test_device.h).
const Device kEmu = DeviceUnderTest();
constexpr double kU = 1.0 / (1 << 24);  // unit roundoff of F32

struct Dims {
  int64_t m, k, n;
};

// Linear on `d`: x [m, k] F32, w [n, k] raw `w_dtype` bytes, out starting as out0 [m, n].
std::vector<float> LinearOn(Device d, const std::vector<float>& x, const std::vector<uint8_t>& w, DType w_dtype,
                            const std::vector<float>& out0, const Dims& s, bool accumulate) {
  Tensor xt = *Tensor::FromHost(x, {s.m, s.k}, d);
  Tensor wt = RawTensor(w.data(), w_dtype, {s.n, s.k}, d);
  Tensor out = *Tensor::FromHost(out0, {s.m, s.n}, d);
  absl::Status st = Linear(Context{.device = d}, {.x = &xt, .w = &wt, .out = &out, .accumulate = accumulate});
  EXPECT_TRUE(st.ok()) << st;
  return *out.ToHostF32();
}

// Raw weight bytes of `dtype` holding the small integers `v` (exact in F32, BF16 and F16).
std::vector<uint8_t> IntegerRaw(const std::vector<int>& v, DType dtype) {
  std::vector<uint8_t> bytes(v.size() * DTypeSize(dtype));
  for (size_t i = 0; i < v.size(); ++i) {
    const float f = static_cast<float>(v[i]);
    if (dtype == DType::kF32) {
      std::memcpy(bytes.data() + 4 * i, &f, 4);
      continue;
    }
    // |v| ≤ 3: BF16 by truncation (exact), F16 from a table.
    static const uint16_t kF16[] = {0x0000, 0x3c00, 0x4000, 0x4200};
    const uint16_t mag = dtype == DType::kBF16 ? F32ToBf16(std::fabs(f)) : kF16[std::abs(v[i])];
    const uint16_t bits = static_cast<uint16_t>(mag | (v[i] < 0 ? 0x8000 : 0));
    std::memcpy(bytes.data() + 2 * i, &bits, 2);
  }
  return bytes;
}

class LinearGemvEmuTest : public testing::TestWithParam<DType> {};

TEST_P(LinearGemvEmuTest, MatchesCpuWithinRoundingBound) {
  const DType w_dtype = GetParam();
  uint32_t seed = 7;
  for (int64_t m = 1; m <= 9; ++m) {
    for (int64_t k : {1, 31, 33, 64, 256, 257, 512}) {
      for (int64_t n : {1, 45}) {
        const Dims s{m, k, n};
        const std::vector<float> x = RandomVector(m * k, seed++);
        const std::vector<uint8_t> w = RandomRaw(n * k, w_dtype, seed++);
        const std::vector<float> out0 = RandomVector(m * n, seed++, -4.0f, 4.0f);
        const std::vector<float> wf = *RawTensor(w.data(), w_dtype, {n, k}, Device::kCpu).ToHostF32();
        for (bool accumulate : {false, true}) {
          const std::vector<float> want = LinearOn(Device::kCpu, x, w, w_dtype, out0, s, accumulate);
          const std::vector<float> got =
              RunBothSchedules([&] { return LinearOn(kEmu, x, w, w_dtype, out0, s, accumulate); });
          ASSERT_EQ(got.size(), want.size());
          const double chain = m <= 8 ? k / 4.0 + 48 : 2.0 * k + 48;
          for (int64_t i = 0; i < m; ++i) {
            for (int64_t j = 0; j < n; ++j) {
              double abs_sum = 0.0;
              for (int64_t q = 0; q < k; ++q) abs_sum += std::fabs(double{x[i * k + q]} * wf[j * k + q]);
              const double w_ij = want[i * n + j];
              const double tol = kU * (chain * abs_sum + 2.0 * std::fabs(w_ij)) + 1e-30;
              ASSERT_NEAR(got[i * n + j], w_ij, tol)
                  << "m " << m << " k " << k << " n " << n << " acc " << accumulate << " at " << i << "," << j;
            }
          }
        }
      }
    }
  }
}

TEST_P(LinearGemvEmuTest, ExactSumsAreBitIdentical) {
  const DType w_dtype = GetParam();
  std::mt19937 rng(3);
  auto small = [&] { return static_cast<int>(rng() % 7) - 3; };  // −3..3
  for (int64_t m : {1, 2, 5, 8, 9}) {
    for (int64_t k : {0, 1, 31, 33, 256, 257}) {
      const int64_t n = 45;
      const Dims s{m, k, n};
      std::vector<int> xi(m * k), wi(n * k), oi(m * n);
      for (int& v : xi) v = small();
      for (int& v : wi) v = small();
      for (int& v : oi) v = small() * 100;
      const std::vector<float> x(xi.begin(), xi.end()), out0(oi.begin(), oi.end());
      const std::vector<uint8_t> w = IntegerRaw(wi, w_dtype);
      for (bool accumulate : {false, true}) {
        std::vector<float> exact(m * n);
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            int64_t sum = accumulate ? oi[i * n + j] : 0;
            for (int64_t q = 0; q < k; ++q) sum += int64_t{xi[i * k + q]} * wi[j * k + q];
            exact[i * n + j] = static_cast<float>(sum);
          }
        }
        const std::vector<float> got =
            RunBothSchedules([&] { return LinearOn(kEmu, x, w, w_dtype, out0, s, accumulate); });
        EXPECT_EQ(got, exact) << "m " << m << " k " << k << " acc " << accumulate;
        EXPECT_EQ(LinearOn(Device::kCpu, x, w, w_dtype, out0, s, accumulate), exact);
      }
    }
  }
}

// x and w as views starting 1 element into a flat buffer: not 16-byte aligned even when k is a
// multiple of the vector width, so the kernel must fall back to element-wise loads.
TEST_P(LinearGemvEmuTest, MisalignedViews) {
  const DType w_dtype = GetParam();
  const int64_t m = 3, k = 64, n = 45;
  const std::vector<float> x_flat = RandomVector(m * k + 1, 11);
  const std::vector<uint8_t> w_flat = RandomRaw(n * k + 1, w_dtype, 12);
  const std::vector<float> out0 = RandomVector(m * n, 13);
  // The same values, aligned (element 1 onwards), on the CPU.
  const std::vector<float> x(x_flat.begin() + 1, x_flat.end());
  const std::vector<uint8_t> w(w_flat.begin() + DTypeSize(w_dtype), w_flat.end());
  const std::vector<float> want = LinearOn(Device::kCpu, x, w, w_dtype, out0, {m, k, n}, true);
  const std::vector<float> aligned = LinearOn(kEmu, x, w, w_dtype, out0, {m, k, n}, true);
  const std::vector<float> got = RunBothSchedules([&] {
    Tensor xb = *Tensor::FromHost(x_flat, {m * k + 1}, kEmu);
    Tensor wb = RawTensor(w_flat.data(), w_dtype, {n * k + 1}, kEmu);
    Tensor xt = *xb.Rows(1, m * k + 1).Reshape({m, k});
    Tensor wt = *wb.Rows(1, n * k + 1).Reshape({n, k});
    Tensor out = *Tensor::FromHost(out0, {m, n}, kEmu);
    EXPECT_TRUE(Linear(Context{.device = kEmu}, {.x = &xt, .w = &wt, .out = &out, .accumulate = true}).ok());
    return *out.ToHostF32();
  });
  // Element-wise and vector loads sum in different orders: compare loosely with both.
  ExpectNear(got, want, 1e-4f, "misaligned vs cpu");
  ExpectNear(got, aligned, 1e-4f, "misaligned vs aligned");
}

INSTANTIATE_TEST_SUITE_P(AllWeightTypes, LinearGemvEmuTest, testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                         [](const testing::TestParamInfo<DType>& info) { return std::string(DTypeName(info.param)); });

}  // namespace
}  // namespace mcserve::kernels
