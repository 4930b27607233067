// CMS backward ops (kernels/cms_backward) and HopeRead on the CUDA emulator against the CPU backend:
// the kernels run hope_read_math.h / cms_backward_math.h serially per row or element on both, so the
// results must be bit-identical, under both emulator schedules (on a GPU: within rounding).
#include <gtest/gtest.h>

#include <vector>

#include "kernels/cms_backward/cms_backward.h"
#include "kernels/hope_read/hope_read.h"
#include "tests/unit/kernels/emu_test_util.h"

namespace mcserve::kernels {
namespace {

const Device kEmu = DeviceUnderTest();

Tensor On(Device d, const std::vector<float>& v, Shape s) { return *Tensor::FromHost(v, s, d); }
Tensor Zeros(Device d, Shape s) { return *Tensor::Zeros(DType::kF32, s, d); }

// On a GPU: CUDA's expf/logf and FMA contraction round differently from the host (SameMathAsCpu),
// so the results agree to a few float ulps of the row's magnitudes, not bit for bit.
constexpr float kGpuTolerance = 2e-6f;

// Runs `run(device)` on the CPU and on the device under test (both schedules); bit-identical on the
// emulator, within kGpuTolerance on a GPU.
void ExpectSame(const std::function<std::vector<float>(Device)>& run, const char* what) {
  const std::vector<float> want = run(Device::kCpu);
  const std::vector<float> got = RunBothSchedules([&] { return run(kEmu); });
  if (SameMathAsCpu()) {
    ASSERT_EQ(got, want) << what;
  } else {
    ExpectNear(got, want, kGpuTolerance, what);
  }
}

TEST(CmsBackwardEmuTest, RowOpsMatchCpu) {
  for (int64_t rows : {1, 3, 300}) {
    for (int64_t n : {1, 7, 64}) {
      const std::vector<float> x = RandomVector(rows * n, 1), w = RandomVector(n, 2, 0.5f, 1.5f),
                               dy = RandomVector(rows * n, 3), g = RandomVector(rows * n, 4, -5, 5);
      const std::vector<int32_t> targets(rows, static_cast<int32_t>(n / 2));
      ExpectSame([&](Device d) {
        Tensor xt = On(d, x, {rows, n}), wt = On(d, w, {n}), dyt = On(d, dy, {rows, n}), dx = Zeros(d, {rows, n});
        EXPECT_TRUE(RmsNormBackward(Context{.device = d}, {.x = &xt, .weight = &wt, .dy = &dyt, .eps = 1e-6f, .dx = &dx}).ok());
        return *dx.ToHostF32();
      }, "RmsNormBackward");
      ExpectSame([&](Device d) {
        Tensor lt = On(d, g, {rows, n}), tt = *Tensor::FromHostI32(targets, {rows}, d), out = Zeros(d, {rows, n});
        EXPECT_TRUE(XentGrad(Context{.device = d}, {.logits = &lt, .targets = &tt, .grad = &out}).ok());
        return *out.ToHostF32();
      }, "XentGrad");
      ExpectSame([&](Device d) {
        Tensor gt = On(d, g, {rows, n}), ut = On(d, x, {rows, n}), dm = On(d, dy, {rows, n});
        Tensor dg = Zeros(d, {rows, n}), du = Zeros(d, {rows, n}), du2 = Zeros(d, {rows, n});
        EXPECT_TRUE(GluBackward(Context{.device = d}, {.gate = &gt, .up = &ut, .dm = &dm, .dgate = &dg, .dup = &du}).ok());
        EXPECT_TRUE(GluBackward(Context{.device = d}, {.up = &gt, .dm = &dm, .dup = &du2}).ok());
        std::vector<float> all = *dg.ToHostF32(), b = *du.ToHostF32(), c = *du2.ToHostF32();
        all.insert(all.end(), b.begin(), b.end());
        all.insert(all.end(), c.begin(), c.end());
        return all;
      }, "GluBackward");
      ExpectSame([&](Device d) {
        Tensor xt = On(d, x, {rows, n}), out = Zeros(d, {n, rows});
        EXPECT_TRUE(Transpose(Context{.device = d}, {.x = &xt, .out = &out}).ok());
        return *out.ToHostF32();
      }, "Transpose");
    }
  }
}

TEST(CmsBackwardEmuTest, HopeReadMatchesCpu) {
  for (int64_t k : {1, 4}) {
    for (HopeActivation act : {HopeActivation::kSilu, HopeActivation::kGelu}) {
      const int64_t n = 3, h = 2, d = 5, e = 10;
      const std::vector<float> q = RandomVector(n * h * d, 5), win = RandomVector(n * (k - 1) * h * d, 6),
                               conv = RandomVector(h * d * k, 7), mem = RandomVector(n * h * 2 * e * d, 8, -0.5f, 0.5f),
                               dy = RandomVector(n * h * d, 9);
      for (bool backward : {false, true}) {
        ExpectSame([&](Device dev) {
          Tensor qt = On(dev, q, {n, h, d}), ct = On(dev, conv, {h * d, 1, k}), mt = On(dev, mem, {n, h, 2 * e * d});
          Tensor dyt = On(dev, dy, {n, h, d}), out = Zeros(dev, {n, h, d});
          std::optional<Tensor> wt;
          if (k > 1) wt = On(dev, win, {n, k - 1, h * d});
          EXPECT_TRUE(HopeRead(Context{.device = dev}, {.activation = act, .expansion = 2, .q_pre = &qt,
                                                        .window = wt ? &*wt : nullptr, .q_conv = &ct, .memory = &mt,
                                                        .dy = backward ? &dyt : nullptr, .out = &out}).ok());
          std::vector<float> all = *out.ToHostF32();
          // The raw read of the same input at an offset (the memory holds 2·E·d floats: offset 0 only fits).
          EXPECT_TRUE(HopeRead(Context{.device = dev}, {.activation = act, .expansion = 1, .query = false, .q_pre = &qt,
                                                        .memory = &mt, .weights_offset = e * d,
                                                        .dy = backward ? &dyt : nullptr, .out = &out}).ok());
          const std::vector<float> raw = *out.ToHostF32();
          all.insert(all.end(), raw.begin(), raw.end());
          return all;
        }, backward ? "HopeRead backward" : "HopeRead forward");
      }
    }
  }
}

}  // namespace
}  // namespace mcserve::kernels
