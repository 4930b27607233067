// LinearGroup: several weights over one input in one op. On the CPU every output is bit-equal to a
// separate Linear call (same per-row sums), whatever the dtypes mixed, the batch size (GEMV and GEMM
// paths) and the threading; on cuda-emu it equals the CPU within Linear's emulator tolerance; bad
// items are refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/linear/gemm_amx.h"
#include "kernels/linear/gemv_bf16_avx512.h"
#include "kernels/linear/linear.h"
#include "random_inputs.h"
#include "tests/unit/kernels/emu_test_device.h"

namespace mcserve::kernels {
namespace {

// A random [n, k] weight of `dtype` on `device` (BF16/F16 stored as rounded bits).
Tensor RandomWeight(DType dtype, int64_t n, int64_t k, uint32_t seed, Device device) {
  std::vector<float> v = RandomVector(n * k, seed);
  if (dtype == DType::kF32) return *Tensor::FromHost(v, {n, k}, device);
  auto bits = std::make_shared<std::vector<uint16_t>>(n * k);
  std::mt19937 rng(seed);
  for (int64_t i = 0; i < n * k; ++i) {  // F16: random sign and mantissa, exponent 2^-6..2^1
    (*bits)[i] = dtype == DType::kBF16
                     ? F32ToBf16(v[i])
                     : static_cast<uint16_t>(((rng() & 1u) << 15) | ((9u + rng() % 8u) << 10) | (rng() & 0x3ffu));
  }
  Tensor host = Tensor::WrapHost(bits->data(), dtype, {n, k}, bits);
  if (device == Device::kCpu) return host;
  Tensor on_device = *Tensor::Zeros(dtype, {n, k}, device);
  EXPECT_TRUE(on_device.CopyFrom(host).ok());
  return on_device;
}

struct Group {
  std::vector<Tensor> weights;  // [n_i, k]
  std::vector<Tensor> outs;     // [m, n_i]
  std::vector<LinearGroupItem> items;
};

// Items with output sizes `sizes` and dtypes cycling F32, BF16, F16 (or all `only` when given).
Group MakeGroup(const std::vector<int64_t>& sizes, int64_t m, int64_t k, Device device, std::optional<DType> only) {
  const DType cycle[] = {DType::kF32, DType::kBF16, DType::kF16};
  Group g;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const DType dtype = only.value_or(cycle[i % 3]);
    g.weights.push_back(RandomWeight(dtype, sizes[i], k, static_cast<uint32_t>(100 + 7 * i + k), device));
    g.outs.push_back(*Tensor::FromHost(std::vector<float>(m * sizes[i], 9.0f), {m, sizes[i]}, device));
  }
  for (size_t i = 0; i < sizes.size(); ++i) g.items.push_back({&g.weights[i], &g.outs[i]});
  return g;
}

void ExpectGroupEqualsSeparate(int64_t m, int64_t k, const std::vector<int64_t>& sizes, cpu::ThreadPool* pool,
                               std::optional<DType> only = std::nullopt) {
  SCOPED_TRACE(testing::Message() << "m=" << m << " k=" << k << " items=" << sizes.size()
                                  << " threads=" << (pool ? pool->num_threads() : 1));
  Context ctx;
  ctx.pool = pool;
  Tensor x = *Tensor::FromHost(RandomVector(m * k, static_cast<uint32_t>(m + k)), {m, k}, Device::kCpu);
  Group g = MakeGroup(sizes, m, k, Device::kCpu, only);
  ASSERT_TRUE(LinearGroup(ctx, {.x = &x, .items = g.items}).ok());
  for (size_t i = 0; i < sizes.size(); ++i) {
    Tensor alone = *Tensor::Zeros(DType::kF32, {m, sizes[i]}, Device::kCpu);
    ASSERT_TRUE(Linear(ctx, {.x = &x, .w = &g.weights[i], .out = &alone}).ok());
    EXPECT_EQ(*g.outs[i].ToHostF32(), *alone.ToHostF32()) << "item " << i;
  }
}

TEST(LinearGroupTest, BitEqualToSeparateCallsSingleThreaded) {
  for (int64_t m : {1, 2, 3, 5, 8, 9, 33}) {
    for (int64_t k : {1, 16, 37, 64}) ExpectGroupEqualsSeparate(m, k, {7, 1, 19, 4, 33}, nullptr);
  }
}

TEST(LinearGroupTest, BitEqualToSeparateCallsThreaded) {
  cpu::ThreadPool pool2(2), pool3(3);
  // Above the GEMV threading threshold, with item boundaries falling inside the workers' blocks.
  ExpectGroupEqualsSeparate(1, 269, {256, 256, 512, 3, 3, 256}, &pool2);
  ExpectGroupEqualsSeparate(4, 131, {301, 5, 77}, &pool3);
  ExpectGroupEqualsSeparate(1, 256, {1024, 1024}, &pool2, DType::kBF16);
  // BF16 at m = 1 (8-row blocks, a masked tail step), ranges starting inside a block.
  ExpectGroupEqualsSeparate(1, 269, {256, 256, 512, 3, 3, 256}, &pool2, DType::kBF16);
  ExpectGroupEqualsSeparate(17, 131, {301, 5, 77}, &pool2);
}

// At 8 < m ≤ 64 a group runs in one ParallelFor on the small-m GEMMs: AVX-512 for F32 and BF16 items
// where the CPU has it, AVX2 for F16 items and with AVX2 forced (all-BF16 groups on AMX where the CPU
// has it, else on AVX-512 at m ≤ 24 on the BF16 GEMV in passes; a BF16 item mixed with others there
// runs alone). Bit-equal to separate calls either way, mixed dtypes included.
TEST(LinearGroupTest, GemmGroupsBitEqualToSeparateCalls) {
  cpu::ThreadPool pool2(2);
  for (bool no_amx : {false, true}) {
    internal::ForceNoAmxForTesting(no_amx);
    for (bool force_avx2 : {false, true}) {
      cpu::ForceAvx2ForTesting(force_avx2);
      SCOPED_TRACE(testing::Message() << (force_avx2 ? "AVX2 forced" : "run-time choice")
                                      << (no_amx ? ", no AMX" : ""));
      for (std::optional<DType> dtype : {std::optional(DType::kF32), std::optional(DType::kBF16),
                                         std::optional(DType::kF16), std::optional<DType>()}) {
        for (int64_t m : {9, 16, 17, 33, 64}) {
          ExpectGroupEqualsSeparate(m, 37, {7, 1, 19, 4, 33}, nullptr, dtype);
        }
        ExpectGroupEqualsSeparate(33, 131, {301, 5, 77}, &pool2, dtype);
        ExpectGroupEqualsSeparate(12, 768, {40, 256, 8}, &pool2, dtype);  // GEMV passes over 8-row blocks
        ExpectGroupEqualsSeparate(32, 256, {64, 32, 96}, &pool2, dtype);  // whole AMX tiles and column steps
      }
    }
  }
  cpu::ForceAvx2ForTesting(false);
  internal::ForceNoAmxForTesting(false);
}

TEST(LinearGroupTest, EmulatedCudaMatchesCpu) {
  const int64_t m = 3, k = 45;
  const std::vector<int64_t> sizes = {13, 2, 40};
  const std::vector<float> xv = RandomVector(m * k, 5);
  Tensor x_cpu = *Tensor::FromHost(xv, {m, k}, Device::kCpu);
  Tensor x_emu = *Tensor::FromHost(xv, {m, k}, DeviceUnderTest());
  Group cpu = MakeGroup(sizes, m, k, Device::kCpu, std::nullopt);
  Group emu = MakeGroup(sizes, m, k, DeviceUnderTest(), std::nullopt);
  ASSERT_TRUE(LinearGroup(Context{}, {.x = &x_cpu, .items = cpu.items}).ok());
  absl::Status s = LinearGroup(Context{.device = DeviceUnderTest()}, {.x = &x_emu, .items = emu.items});
  ASSERT_TRUE(s.ok()) << s;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const std::vector<float> want = *cpu.outs[i].ToHostF32(), got = *emu.outs[i].ToHostF32();
    ASSERT_EQ(got.size(), want.size());
    // Linear's emulator tolerance (linear_emu_test.cc), with Σ|x·w| ≤ 2k (|x| ≤ 1, |w| < 2).
    for (size_t j = 0; j < got.size(); ++j) EXPECT_NEAR(got[j], want[j], 2e-7 * k * (2.0 * k) + 1e-6) << i << "," << j;
  }
}

TEST(LinearGroupTest, RefusesBadItems) {
  Tensor x = *Tensor::Zeros(DType::kF32, {2, 4}, Device::kCpu);
  Tensor w = *Tensor::Zeros(DType::kF32, {3, 4}, Device::kCpu), out = *Tensor::Zeros(DType::kF32, {2, 3}, Device::kCpu);
  Tensor w_bad = *Tensor::Zeros(DType::kF32, {3, 5}, Device::kCpu);
  Tensor out_bad = *Tensor::Zeros(DType::kF32, {2, 4}, Device::kCpu);
  const Context ctx;
  EXPECT_EQ(LinearGroup(ctx, {.x = &x, .items = {}}).code(), absl::StatusCode::kInvalidArgument);
  for (const LinearGroupItem& bad : {LinearGroupItem{&w_bad, &out}, LinearGroupItem{&w, &out_bad},
                                     LinearGroupItem{nullptr, &out}, LinearGroupItem{&w, nullptr}}) {
    const LinearGroupItem items[] = {{&w, &out}, bad};
    absl::Status s = LinearGroup(ctx, {.x = &x, .items = items});
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  }
}

}  // namespace
}  // namespace mcserve::kernels
