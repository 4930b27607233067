// GAM's new ops (LayerNorm, Softmax, GatedFusion) on the CUDA emulator against the CPU backend:
// row widths below, at and above the block size and not multiples of a warp, in-place outputs,
// both emulator schedules bit-identical. Tolerance: the row reductions add in a different order
// (block tree vs eight CPU partial sums), so results agree to 1e-5 relative (+1e-6 absolute);
// GatedFusion is per element and agrees to the last ulps.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/gated_fusion/gated_fusion.h"
#include "kernels/layer_norm/layer_norm.h"
#include "kernels/softmax/softmax.h"
#include "tests/unit/kernels/emu_test_util.h"

namespace mcserve::kernels {
namespace {

const Device kEmu = DeviceUnderTest();

struct Case {
  int64_t rows, n;
};
const Case kCases[] = {{1, 1}, {3, 5}, {4, 31}, {2, 32}, {5, 33}, {3, 256}, {6, 300}, {2, 1000}, {1, 2051}};

void ExpectClose(const std::vector<float>& got, const std::vector<float>& want, const Case& c) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-5f * std::fabs(want[i]) + 1e-6f) << "rows " << c.rows << " n " << c.n << " at " << i;
  }
}

std::vector<float> LayerNormOn(Device d, const std::vector<float>& x, const std::vector<float>& w,
                               const std::vector<float>& b, const Case& c, bool in_place) {
  Tensor xt = *Tensor::FromHost(x, {c.rows, c.n}, d), wt = *Tensor::FromHost(w, {c.n}, d);
  Tensor bt = *Tensor::FromHost(b, {c.n}, d);
  Tensor out = in_place ? xt : *Tensor::Zeros(DType::kF32, {c.rows, c.n}, d);
  EXPECT_TRUE(LayerNorm(Context{.device = d}, {.x = &xt, .weight = &wt, .bias = &bt, .eps = 1e-5f, .out = &out}).ok());
  return *out.ToHostF32();
}

TEST(GamOpsEmuTest, LayerNormMatchesCpu) {
  uint32_t seed = 21;
  for (const Case& c : kCases) {
    const std::vector<float> x = RandomVector(c.rows * c.n, seed++, -3.0f, 5.0f);
    const std::vector<float> w = RandomVector(c.n, seed++), b = RandomVector(c.n, seed++);
    const std::vector<float> want = LayerNormOn(Device::kCpu, x, w, b, c, false);
    for (bool in_place : {false, true}) {
      ExpectClose(RunBothSchedules([&] { return LayerNormOn(kEmu, x, w, b, c, in_place); }), want, c);
    }
  }
}

std::vector<float> SoftmaxOn(Device d, const std::vector<float>& x, const Case& c, bool in_place) {
  Tensor xt = *Tensor::FromHost(x, {c.rows, c.n}, d);
  Tensor out = in_place ? xt : *Tensor::Zeros(DType::kF32, {c.rows, c.n}, d);
  EXPECT_TRUE(Softmax(Context{.device = d}, {.x = &xt, .out = &out}).ok());
  return *out.ToHostF32();
}

TEST(GamOpsEmuTest, SoftmaxMatchesCpu) {
  uint32_t seed = 41;
  for (const Case& c : kCases) {
    const std::vector<float> x = RandomVector(c.rows * c.n, seed++, -8.0f, 8.0f);
    const std::vector<float> want = SoftmaxOn(Device::kCpu, x, c, false);
    for (bool in_place : {false, true}) {
      ExpectClose(RunBothSchedules([&] { return SoftmaxOn(kEmu, x, c, in_place); }), want, c);
    }
  }
}

std::vector<float> FuseOn(Device d, const std::vector<float>& g, const std::vector<float>* b,
                          const std::vector<float>& l, const std::vector<float>& gl, const Case& c) {
  Tensor gt = *Tensor::FromHost(g, {c.rows, 2 * c.n}, d), lt = *Tensor::FromHost(l, {c.rows, c.n}, d);
  Tensor glt = *Tensor::FromHost(gl, {c.rows, c.n}, d);
  std::optional<Tensor> bt;
  if (b != nullptr) bt = *Tensor::FromHost(*b, {2 * c.n}, d);
  EXPECT_TRUE(GatedFusion(Context{.device = d},
                          {.gate = &gt, .gate_bias = bt ? &*bt : nullptr, .local = &lt, .global = &glt, .out = &lt})
                  .ok());
  return *lt.ToHostF32();
}

TEST(GamOpsEmuTest, GatedFusionMatchesCpu) {
  uint32_t seed = 61;
  for (const Case& c : kCases) {
    const std::vector<float> g = RandomVector(c.rows * 2 * c.n, seed++, -4.0f, 4.0f), b = RandomVector(2 * c.n, seed++);
    const std::vector<float> l = RandomVector(c.rows * c.n, seed++), gl = RandomVector(c.rows * c.n, seed++);
    for (const std::vector<float>* bias : {static_cast<const std::vector<float>*>(nullptr), &b}) {
      const std::vector<float> want = FuseOn(Device::kCpu, g, bias, l, gl, c);
      ExpectClose(RunBothSchedules([&] { return FuseOn(kEmu, g, bias, l, gl, c); }), want, c);
    }
  }
}

TEST(GamOpsEmuTest, ValidationAppliesOnEmu) {
  Context ctx{.device = kEmu};
  Tensor x = *Tensor::Zeros(DType::kF32, {2, 4}, kEmu), w = *Tensor::Zeros(DType::kF32, {4}, kEmu);
  Tensor w_cpu = *Tensor::Zeros(DType::kF32, {4}, Device::kCpu);
  EXPECT_EQ(LayerNorm(ctx, {.x = &x, .weight = &w, .bias = &w_cpu, .out = &x}).code(),
            absl::StatusCode::kInvalidArgument);
  Tensor y = *Tensor::Zeros(DType::kF32, {2, 3}, kEmu);
  EXPECT_EQ(Softmax(ctx, {.x = &x, .out = &y}).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mcserve::kernels
