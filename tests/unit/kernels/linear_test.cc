// Linear against a double-precision loop: F32/BF16/F16 weights, odd sizes, GEMV (m ≤ 8) and GEMM
// paths (the small-m GEMMs on AVX-512, AMX and AVX2; OpenBLAS above m = 64), threaded and not,
// accumulate, and argument validation.
#include "kernels/cpu/isa.h"
#include "kernels/linear/linear.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "random_inputs.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/linear/gemm_amx.h"
#include "kernels/linear/gemm_transpose.h"
#include "kernels/linear/gemv_bf16_avx512.h"
#include "tests/unit/kernels/param_printers.h"

namespace mcserve::kernels {
namespace {

struct Weight {
  Tensor tensor;           // [n, k] in its stored dtype (read-only view, like an mmapped weight)
  std::vector<float> f32;  // [n, k] the exact values the stored weights represent
};

// Random weights of `dtype`; BF16/F16 values are exactly representable so the reference is exact.
Weight MakeWeight(DType dtype, int64_t n, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Weight w;
  w.f32.resize(n * k);
  if (dtype == DType::kF32) {
    auto data = std::make_shared<std::vector<float>>(n * k);
    for (int64_t i = 0; i < n * k; ++i) w.f32[i] = (*data)[i] = u(rng);
    w.tensor = Tensor::WrapHost(data->data(), dtype, {n, k}, data);
    return w;
  }
  auto bits = std::make_shared<std::vector<uint16_t>>(n * k);
  for (int64_t i = 0; i < n * k; ++i) {
    if (dtype == DType::kBF16) {
      (*bits)[i] = F32ToBf16(u(rng));
      w.f32[i] = Bf16ToF32((*bits)[i]);
    } else {  // F16: sign, exponent 2^-6..2^1, random mantissa
      uint16_t h = static_cast<uint16_t>(((rng() & 1u) << 15) | ((9u + rng() % 8u) << 10) | (rng() & 0x3ffu));
      (*bits)[i] = h;
      w.f32[i] = F16ToF32(h);
    }
  }
  w.tensor = Tensor::WrapHost(bits->data(), dtype, {n, k}, bits);
  return w;
}

// Checks out[m, n] == base + x·wᵀ within 1e-5 of Σ|x·w| per element.
void ExpectLinear(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& base,
                  const std::vector<float>& out, int64_t m, int64_t n, int64_t k) {
  int bad = 0;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double ref = base.empty() ? 0.0 : base[i * n + j], mag = std::fabs(ref);
      for (int64_t c = 0; c < k; ++c) {
        double p = static_cast<double>(x[i * k + c]) * w[j * k + c];
        ref += p;
        mag += std::fabs(p);
      }
      double got = out[i * n + j];
      if (!(std::fabs(got - ref) <= 1e-5 * mag + 1e-6) && ++bad <= 5) {
        ADD_FAILURE() << "out[" << i << ", " << j << "] = " << got << ", want " << ref << " (m=" << m << " n=" << n
                      << " k=" << k << ")";
      }
    }
  }
  EXPECT_EQ(bad, 0);
}

void RunCase(DType dtype, int64_t m, int64_t n, int64_t k, bool accumulate, cpu::ThreadPool* pool) {
  SCOPED_TRACE(testing::Message() << std::string(DTypeName(dtype)) << " m=" << m << " n=" << n << " k=" << k
                                  << " acc=" << accumulate << " threads=" << (pool ? pool->num_threads() : 1));
  Weight w = MakeWeight(dtype, n, k, static_cast<uint32_t>(7 * m + n + 31 * k));
  std::vector<float> xv = RandomVector(m * k, static_cast<uint32_t>(m + 3 * k));
  std::vector<float> base = accumulate ? RandomVector(m * n, 99) : std::vector<float>(m * n, 123.0f);
  auto x = Tensor::FromHost(xv, {m, k}, Device::kCpu);
  auto out = Tensor::FromHost(base, {m, n}, Device::kCpu);  // garbage unless accumulating
  ASSERT_TRUE(x.ok() && out.ok());
  Context ctx;
  ctx.pool = pool;
  ASSERT_TRUE(Linear(ctx, {&*x, &w.tensor, &*out, accumulate}).ok());
  auto got = out->ToHostF32();
  ASSERT_TRUE(got.ok());
  ExpectLinear(xv, w.f32, accumulate ? base : std::vector<float>(), *got, m, n, k);
}

class LinearDTypeTest : public testing::TestWithParam<DType> {};

TEST_P(LinearDTypeTest, MatchesDoubleLoopSingleThreaded) {
  for (int64_t m : {1, 2, 3, 4, 5, 6, 7, 8, 9, 64, 65, 97}) {  // the GEMV, the small-m GEMMs, OpenBLAS
    for (int64_t k : {1, 7, 16, 37, 269}) RunCase(GetParam(), m, 19, k, false, nullptr);
    RunCase(GetParam(), m, 3, 21, false, nullptr);  // fewer output rows than any block
  }
}

TEST_P(LinearDTypeTest, MatchesDoubleLoopThreaded) {
  cpu::ThreadPool pool2(2), pool3(3);
  // Sizes above the GEMV threading bar (m × weight bytes ≥ 192 KB), odd everywhere.
  RunCase(GetParam(), 1, 2053, 269, false, &pool2);
  RunCase(GetParam(), 7, 301, 269, false, &pool3);
  RunCase(GetParam(), 64, 301, 131, false, &pool2);
  RunCase(GetParam(), 1, 2053, 269, true, &pool3);
  RunCase(GetParam(), 64, 301, 131, true, &pool2);
  RunCase(GetParam(), 80, 301, 131, true, &pool3);
}

TEST_P(LinearDTypeTest, Accumulates) {
  for (int64_t m : {1, 7, 64, 65}) RunCase(GetParam(), m, 33, 45, true, nullptr);
}

TEST_P(LinearDTypeTest, EmptyReductionGivesZeroOrKeepsOut) {
  Weight w = MakeWeight(GetParam(), 5, 0, 1);
  auto x = Tensor::Zeros(DType::kF32, {3, 0}, Device::kCpu);
  auto out = Tensor::FromHost(std::vector<float>(15, 2.0f), {3, 5}, Device::kCpu);
  ASSERT_TRUE(x.ok() && out.ok());
  ASSERT_TRUE(Linear({}, {&*x, &w.tensor, &*out, true}).ok());
  EXPECT_EQ(*out->ToHostF32(), std::vector<float>(15, 2.0f));
  ASSERT_TRUE(Linear({}, {&*x, &w.tensor, &*out, false}).ok());
  EXPECT_EQ(*out->ToHostF32(), std::vector<float>(15, 0.0f));
}

INSTANTIATE_TEST_SUITE_P(AllWeightTypes, LinearDTypeTest, testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                         [](const testing::TestParamInfo<DType>& info) { return std::string(DTypeName(info.param)); });

// out = x · wᵀ for x [m, k] = xv and `w`, with `threads` threads (1: no pool).
std::vector<float> LinearOut(const Weight& w, const std::vector<float>& xv, int64_t m, int threads) {
  const int64_t n = w.tensor.dim(0), k = w.tensor.dim(1);
  auto x = Tensor::FromHost(xv, {m, k}, Device::kCpu);
  auto out = Tensor::Zeros(DType::kF32, {m, n}, Device::kCpu);
  EXPECT_TRUE(x.ok() && out.ok());
  cpu::ThreadPool pool(threads);
  Context ctx;
  ctx.pool = threads > 1 ? &pool : nullptr;
  EXPECT_TRUE(Linear(ctx, {&*x, &w.tensor, &*out, false}).ok());
  return *out->ToHostF32();
}

// The GEMV cuts each thread's rows into parts read side by side; a weight row's sum must not depend
// on the part or the thread range it falls in, nor (on the AVX2 kernel) on the batch around its row
// of x: a request's logits are the same whatever else decodes with it.
TEST_P(LinearDTypeTest, GemvOutputsDoNotDependOnThreadsOrBatch) {
  const int64_t n = 2053, k = 269;  // above the threading bar at m = 1, odd everywhere
  const Weight w = MakeWeight(GetParam(), n, k, 5);
  const std::vector<float> row = RandomVector(k, 17);
  for (bool force_avx2 : {true, false}) {
    cpu::ForceAvx2ForTesting(force_avx2);
    // The AVX-512 BF16 kernel keeps even and odd sums apart at m = 1 only: its bits depend on m.
    const bool batch_free = GetParam() != DType::kBF16 || !cpu::UseAvx512();
    const std::vector<float> alone = LinearOut(w, row, 1, 1);
    for (int64_t m : {1, 2, 3, 5, 8}) {
      std::vector<float> x = RandomVector(m * k, static_cast<uint32_t>(m));
      std::copy(row.begin(), row.end(), x.begin() + (m - 1) * k);  // the request in the last batch row
      const std::vector<float> one = LinearOut(w, x, m, 1);
      for (int threads : {2, 3}) {
        EXPECT_EQ(LinearOut(w, x, m, threads), one) << "m=" << m << " threads=" << threads << " avx2=" << force_avx2;
      }
      if (batch_free) {
        EXPECT_TRUE(std::equal(alone.begin(), alone.end(), one.begin() + (m - 1) * n))
            << "m=" << m << " avx2=" << force_avx2;
      }
    }
  }
  cpu::ForceAvx2ForTesting(false);
}

// The BF16 GEMV has two CPU kernels chosen at run time: AVX-512 where the CPU has it, AVX2
// elsewhere (a machine without AVX-512 runs the forced path). Both meet the double loop here, whatever this machine picks by default.
TEST(LinearBf16PathsTest, Avx2AndAvx512KernelsBothMatchTheDoubleLoop) {
  cpu::ThreadPool pool2(2);
  for (bool force_avx2 : {true, false}) {
    cpu::ForceAvx2ForTesting(force_avx2);
    SCOPED_TRACE(force_avx2 ? "AVX2 forced" : (cpu::UseAvx512() ? "AVX-512" : "AVX2 (no AVX-512)"));
    for (int64_t m : {1, 2, 3, 5, 8}) {
      for (int64_t k : {1, 31, 32, 33, 64, 269}) RunCase(DType::kBF16, m, 19, k, false, nullptr);
      RunCase(DType::kBF16, m, 7, 45, true, nullptr);
    }
    RunCase(DType::kBF16, 1, 2053, 269, false, &pool2);
  }
  cpu::ForceAvx2ForTesting(false);
}

// Without AMX, BF16 batches of 9 to 24 run the AVX-512 GEMV in passes of 8 rows over blocks of weight
// rows: each pass's rows equal, bit for bit, the GEMV run on those rows alone, whatever the threads.
TEST(LinearBf16PathsTest, GemvPassesEqualTheGemvOnEachPassRows) {
  if (!cpu::UseAvx512()) GTEST_SKIP() << "this CPU has no AVX-512F/BW: the passes do not run";
  internal::ForceNoAmxForTesting(true);
  for (int64_t k : {269, 768}) {  // blocks of 24 and 8 weight rows
    const int64_t n = 301;
    const Weight w = MakeWeight(DType::kBF16, n, k, static_cast<uint32_t>(k));
    for (int64_t m : {9, 12, 16, 17, 24}) {  // the rows after the first 8 run in passes themselves past 16
      const std::vector<float> x = RandomVector(m * k, static_cast<uint32_t>(m));
      const std::vector<float> got = LinearOut(w, x, m, 1);
      const std::vector<float> first = LinearOut(w, {x.begin(), x.begin() + 8 * k}, 8, 1);
      const std::vector<float> rest = LinearOut(w, {x.begin() + 8 * k, x.end()}, m - 8, 1);
      EXPECT_TRUE(std::equal(first.begin(), first.end(), got.begin())) << "m=" << m << " k=" << k;
      EXPECT_TRUE(std::equal(rest.begin(), rest.end(), got.begin() + 8 * n)) << "m=" << m << " k=" << k;
      for (int threads : {2, 3}) EXPECT_EQ(LinearOut(w, x, m, threads), got) << "m=" << m << " threads=" << threads;
    }
  }
  internal::ForceNoAmxForTesting(false);
}

// SplitForAvx512's layout, element by element: each 32-column chunk as its 16 even then 16 odd
// columns, zero past k, for k on and off the chunk and half-chunk edges.
TEST(LinearBf16PathsTest, SplitForAvx512LaysOutEvenThenOddColumns) {
  if (!cpu::UseAvx512()) GTEST_SKIP() << "this CPU has no AVX-512F/BW: the split cannot run";
  for (int64_t k : {1, 15, 16, 17, 31, 32, 33, 70}) {
    const int64_t m = 3, ldx = internal::Avx512Columns(k);
    std::vector<float> x(m * k), xs(m * ldx, -1.0f);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i + 1);
    internal::SplitForAvx512(x.data(), m, k, xs.data());
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t c = 0; c < ldx; c += 32) {
        for (int64_t j = 0; j < 16; ++j) {
          const int64_t even = c + 2 * j, odd = even + 1;
          EXPECT_EQ(xs[i * ldx + c + j], even < k ? x[i * k + even] : 0.0f) << "k " << k << " row " << i;
          EXPECT_EQ(xs[i * ldx + c + 16 + j], odd < k ? x[i * k + odd] : 0.0f) << "k " << k << " row " << i;
        }
      }
    }
  }
}

// The GEMM for 8 < m ≤ 64 has an AVX-512 kernel for F32 and BF16 weights (gemm_avx512.h), an AMX
// kernel for BF16 weights from m = 16 (gemm_amx.h), and an AVX2 kernel (gemm_avx2.h) for F16 weights
// and for CPUs without AVX-512 (the forced-AVX2 path). Each meets the double loop with tails
// everywhere: m past a multiple of 16 (one zmm or two ymm of batch rows, one AMX tile), n past the
// weight-row blocks (AVX-512: 12, 8 or 6 rows, then 4 and 1; AVX2: 6, 3, 1; AMX's 16 and 32), k past
// 16 and 32 (AMX's column step), and BF16/F16 widening blocks (k = 269).
enum class GemmPath { kAvx2Forced, kAvx512, kAmx };

std::string GemmPathName(const testing::TestParamInfo<std::tuple<DType, GemmPath>>& info) {
  const GemmPath path = std::get<1>(info.param);
  return std::string(DTypeName(std::get<0>(info.param))) +
         (path == GemmPath::kAvx2Forced ? "_Avx2Forced" : path == GemmPath::kAvx512 ? "_Avx512" : "_Amx");
}

class LinearGemmPathsTest : public testing::TestWithParam<std::tuple<DType, GemmPath>> {
 protected:
  void TearDown() override {
    cpu::ForceAvx2ForTesting(false);
    internal::ForceNoAmxForTesting(false);
  }
};

TEST_P(LinearGemmPathsTest, MatchesTheDoubleLoop) {
  const auto [dtype, path] = GetParam();
  cpu::ForceAvx2ForTesting(path == GemmPath::kAvx2Forced);
  internal::ForceNoAmxForTesting(path != GemmPath::kAmx);
  if (path != GemmPath::kAvx2Forced && !cpu::UseAvx512()) {
    GTEST_SKIP() << "this CPU has no AVX-512F/BW (or MCSERVE_CPU_ISA=avx2): the AVX-512 and AMX GEMMs cannot run";
  }
  if (path == GemmPath::kAmx && !internal::UseAmxBf16Gemm()) {
    GTEST_SKIP() << "this CPU (or its kernel) offers no AMX-BF16, or MCSERVE_CPU_ISA=avx512: the AMX GEMM cannot run";
  }
  for (int64_t m : {8, 9, 16, 17, 32, 33, 64}) {
    for (int64_t k : {1, 15, 33, 64, 269}) {
      for (int64_t n : {3, 29, 47}) {
        for (bool accumulate : {false, true}) RunCase(dtype, m, n, k, accumulate, nullptr);
      }
    }
  }
  cpu::ThreadPool pool2(2), pool3(3);  // above the threading threshold: blocks split over threads
  RunCase(dtype, 33, 301, 77, false, &pool2);
  RunCase(dtype, 17, 301, 269, true, &pool3);
  RunCase(dtype, 64, 157, 131, true, &pool3);
  RunCase(dtype, 32, 160, 256, false, &pool2);  // whole tiles and column steps: weights read in place
}

// The AVX-512 small-m GEMM widens BF16 rows exactly and then runs the F32 kernel's sums
// (gemm_avx512.h): every output equals, bit for bit, the F32 GEMM's on the widened weights, for
// every tile size BF16 weights reach (8, 6, 4, 1 rows; batches of 9 to 24 run the BF16 GEMV in passes
// instead) and its neighbours, threaded and not. A row widened wrong, or a tile's rows widened into
// the wrong buffer, shows here where a tolerance would hide it.
TEST(LinearGemmAvx512Test, Bf16EqualsF32OnTheWidenedWeights) {
  cpu::ForceAvx2ForTesting(false);
  internal::ForceNoAmxForTesting(true);
  if (!cpu::UseAvx512()) GTEST_SKIP() << "this CPU has no AVX-512F/BW: the AVX-512 GEMM cannot run";
  for (int threads : {1, 2}) {
    for (int64_t m : {25, 31, 32, 33, 48, 49, 64}) {
      for (int64_t k : {1, 15, 16, 17, 64, 269}) {
        for (int64_t n : {1, 5, 13, 29, 160, 301}) {
          SCOPED_TRACE(testing::Message() << "m=" << m << " n=" << n << " k=" << k << " threads=" << threads);
          const Weight bf16 = MakeWeight(DType::kBF16, n, k, static_cast<uint32_t>(m + 5 * n + 11 * k));
          auto f32 = Tensor::FromHost(bf16.f32, {n, k}, Device::kCpu);
          ASSERT_TRUE(f32.ok());
          const std::vector<float> x = RandomVector(m * k, static_cast<uint32_t>(m * k));
          const std::vector<float> got = LinearOut(bf16, x, m, threads);
          const std::vector<float> want = LinearOut({.tensor = *f32, .f32 = bf16.f32}, x, m, threads);
          int bad = 0;
          for (int64_t i = 0; i < m * n; ++i) {
            if (std::bit_cast<uint32_t>(got[i]) != std::bit_cast<uint32_t>(want[i]) && ++bad <= 3) {
              ADD_FAILURE() << "out[" << i / n << ", " << i % n << "] = " << got[i] << ", F32 GEMM " << want[i];
            }
          }
          ASSERT_EQ(bad, 0);
        }
      }
    }
  }
  internal::ForceNoAmxForTesting(false);
}

INSTANTIATE_TEST_SUITE_P(AllWeightTypes, LinearGemmPathsTest,
                         testing::Combine(testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                                          testing::Values(GemmPath::kAvx2Forced, GemmPath::kAvx512, GemmPath::kAmx)),
                         GemmPathName);

// PackForGemmAmx's layout and split, element by element: part p of x[16b + j, 2c + t] at
// [p][b][c][j][t], the three parts summing back to x (to F32's last bit here: |x| in [1, 2)), each a
// BF16 value, zeros past m and k.
TEST(LinearAmxTest, PackSplitsXIntoThreeBf16PartsInTileLayout) {
  if (!internal::UseAmxBf16Gemm()) GTEST_SKIP() << "this CPU offers no AMX-BF16: the packing's kernel cannot run";
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(1.0f, 2.0f);
  for (auto [m, k] : {std::pair<int64_t, int64_t>{16, 32}, {17, 33}, {33, 70}, {5, 1}}) {
    std::vector<float> x(m * k);
    for (float& v : x) v = rng() % 2 ? u(rng) : -u(rng);
    std::vector<uint16_t> xp(internal::GemmAmxPackedSize(m, k), 0xffff);
    internal::PackForGemmAmx(x.data(), m, k, xp.data());
    const int64_t mp = (m + 15) / 16 * 16, kp = (k + 31) / 32 * 32;
    ASSERT_EQ(static_cast<int64_t>(xp.size()), 3 * mp * kp);
    for (int64_t i = 0; i < mp; ++i) {
      for (int64_t c = 0; c < kp; ++c) {
        float sum = 0.0f;
        for (int p = 0; p < 3; ++p) {
          const uint16_t bits = xp[((p * (mp / 16) + i / 16) * (kp / 2) + c / 2) * 32 + (i % 16) * 2 + c % 2];
          sum += std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
        }
        const float want = i < m && c < k ? x[i * k + c] : 0.0f;
        ASSERT_EQ(sum, want) << "m " << m << " k " << k << " at " << i << ", " << c;
      }
    }
    // The same packing done in two uneven ranges of pieces (as threads do it) is the same, element for element.
    const int64_t pieces = internal::GemmAmxPackPieces(m, k);
    ASSERT_EQ(pieces, (mp / 16) * (kp / 32));
    std::vector<uint16_t> split(xp.size(), 0xffff);
    internal::PackForGemmAmx(x.data(), m, k, split.data(), 0, pieces / 3);
    internal::PackForGemmAmx(x.data(), m, k, split.data(), pieces / 3, pieces);
    EXPECT_EQ(split, xp) << "m " << m << " k " << k;
  }
}

// The small-m GEMMs' transpose of x: xt [k, lanes] holds x's column c under row c, zeros past m; done
// in uneven ranges of pieces (as threads do it) it is the same, element for element.
TEST(LinearGemmTransposeTest, TransposesXAndItsPiecesAgree) {
  for (auto [m, k] : {std::pair<int64_t, int64_t>{9, 256}, {16, 33}, {32, 7}, {61, 70}}) {
    const std::vector<float> x = RandomVector(m * k, static_cast<uint32_t>(m + k));
    const int64_t lanes = internal::GemmLanes(m), pieces = internal::GemmTransposePieces(k);
    ASSERT_EQ(pieces, (k + 7) / 8);
    std::vector<float> whole(k * lanes, -7.0f), split(k * lanes, -7.0f);
    internal::TransposeForGemm(x.data(), m, k, whole.data());
    for (int64_t c = 0; c < k; ++c) {
      for (int64_t i = 0; i < lanes; ++i) {
        ASSERT_EQ(whole[c * lanes + i], i < m ? x[i * k + c] : 0.0f)
            << "m " << m << " k " << k << " at " << c << ", " << i;
      }
    }
    internal::TransposeForGemm(x.data(), m, k, split.data(), 0, pieces / 3);
    internal::TransposeForGemm(x.data(), m, k, split.data(), pieces / 3, pieces);
    EXPECT_EQ(split, whole) << "m " << m << " k " << k;
  }
}

TEST(LinearTest, RejectsBadArguments) {
  auto x = *Tensor::Zeros(DType::kF32, {2, 4}, Device::kCpu);
  auto w = *Tensor::Zeros(DType::kF32, {3, 4}, Device::kCpu);
  auto out = *Tensor::Zeros(DType::kF32, {2, 3}, Device::kCpu);
  auto w_bad_k = *Tensor::Zeros(DType::kF32, {3, 5}, Device::kCpu);
  auto w_i32 = *Tensor::Zeros(DType::kI32, {3, 4}, Device::kCpu);
  auto x_bf16 = *Tensor::Zeros(DType::kBF16, {2, 4}, Device::kCpu);
  auto out_bad = *Tensor::Zeros(DType::kF32, {2, 4}, Device::kCpu);
  auto x_rank3 = *Tensor::Zeros(DType::kF32, {1, 2, 4}, Device::kCpu);
  std::vector<float> ro(6);
  Tensor out_ro = Tensor::WrapHost(ro.data(), DType::kF32, {2, 3}, nullptr);
  const Context ctx;
  EXPECT_TRUE(Linear(ctx, {&x, &w, &out}).ok());
  for (const LinearArgs& a : std::vector<LinearArgs>{{&x, &w_bad_k, &out},
                                                     {&x, &w_i32, &out},
                                                     {&x_bf16, &w, &out},
                                                     {&x, &w, &out_bad},
                                                     {&x_rank3, &w, &out},
                                                     {nullptr, &w, &out},
                                                     {&x, nullptr, &out},
                                                     {&x, &w, nullptr},
                                                     {&x, &w, &out_ro}}) {
    absl::Status s = Linear(ctx, a);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  }
  EXPECT_NE(Linear(ctx, {&x, &w_bad_k, &out}).message().find("Linear"), std::string::npos);
}

TEST(LinearTest, CudaDeviceFailsWithoutAGpu) {
  auto x = *Tensor::Zeros(DType::kF32, {2, 4}, Device::kCpu);
  auto w = *Tensor::Zeros(DType::kF32, {3, 4}, Device::kCpu);
  auto out = *Tensor::Zeros(DType::kF32, {2, 3}, Device::kCpu);
  Context ctx;
  ctx.device = Device::kCuda;
  EXPECT_FALSE(Linear(ctx, {&x, &w, &out}).ok());  // no GPU here: never succeeds
}

}  // namespace
}  // namespace mcserve::kernels
