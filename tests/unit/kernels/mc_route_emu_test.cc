// McRoute on the CUDA emulator against the CPU backend, bit for bit and under both emulator
// schedules: T·Hs below, above and not a multiple of the 128-thread block, long lists, empty lists,
// no pages at all, exact score ties; McReadout on cuda-emu over the routed lists against the full
// lists; validation on cuda-emu (a tensor left on the CPU, bad CSR values in device memory, top_k 0).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "emu_test_util.h"
#include "gtest/gtest.h"
#include "kernels/mc_readout/mc_readout_math.h"
#include "kernels/mc_route/mc_route.h"
#include "mc_case.h"

namespace mcserve::kernels {
namespace {

// Selected page indices as floats (exact: small integers) for the schedules helper.
std::vector<float> AsFloats(const std::vector<int32_t>& v) { return std::vector<float>(v.begin(), v.end()); }

// Runs on the CPU and on cuda-emu under both schedules; requires bit-identical selections.
void CheckAgainstCpu(const Case& c, int top_k) {
  SCOPED_TRACE(testing::Message() << "T=" << c.t << " Hs=" << c.hs << " K=" << c.k << " pages=" << c.pooled.size()
                                  << " top_k=" << top_k);
  const RouteResult cpu = RunRoute(c, top_k, Device::kCpu);
  ASSERT_TRUE(cpu.status.ok()) << cpu.status;
  const std::vector<float> emu = RunBothSchedules([&] {
    const RouteResult r = RunRoute(c, top_k, DeviceUnderTest());
    EXPECT_TRUE(r.status.ok()) << r.status;
    return AsFloats(r.selected);
  });
  EXPECT_EQ(emu, AsFloats(cpu.selected));
}

TEST(McRouteEmuTest, MatchesCpuBitForBit) {
  struct Size {
    int64_t t, hs, k;
    int pages;
    double density;
  };
  // T·Hs = 1, 111 (one partial block), 390 (four blocks, the last partial), 35 with 40-page lists,
  // 22 with no pages at all.
  for (Size s : {Size{1, 1, 4, 3, 0.6}, Size{37, 3, 19, 6, 0.6}, Size{130, 3, 8, 9, 0.7}, Size{5, 7, 33, 40, 0.9},
                 Size{11, 2, 5, 0, 0.6}}) {
    const Case c = RandomCase(s.t, s.hs, s.k, /*v=*/1, s.pages, 3 * s.t + s.k, s.density);
    for (int top_k : {1, 2, 3, 7, 100}) CheckAgainstCpu(c, top_k);
  }
}

TEST(McRouteEmuTest, ExactTiesMatchCpu) {
  Case c = RandomCase(/*t=*/20, /*hs=*/3, /*k=*/8, /*v=*/1, /*num_pages=*/6, 4, /*density=*/1.0);
  for (int i = 1; i < 6; ++i) c.pooled[i] = c.pooled[i % 2];  // scores tie in two groups of three
  for (int top_k : {1, 2, 4}) CheckAgainstCpu(c, top_k);
  const RouteResult r = RunRoute(c, 1, DeviceUnderTest());
  ASSERT_TRUE(r.status.ok()) << r.status;
  // top_k = 1 keeps the first listed page of the higher-scoring group.
  for (int64_t t = 0; t < c.t; ++t) {
    if (c.lists[t].empty()) continue;
    for (int64_t h = 0; h < c.hs; ++h) {
      const float* u = c.u.data() + (t * c.hs + h) * c.k;
      float z[2];
      for (int g = 0; g < 2; ++g) z[g] = mc_readout_math::Dot(u, c.pooled[g].data() + h * c.k, static_cast<int>(c.k));
      const int best = z[0] >= z[1] ? 0 : 1;
      const auto& list = c.lists[t];
      const int32_t want = *std::find_if(list.begin(), list.end(), [&](int32_t p) { return p % 2 == best; });
      EXPECT_EQ(r.selected[t * c.hs + h], want) << "t=" << t << " h=" << h;
    }
  }
}

// McReadout on cuda-emu over the routed lists equals it over the full lists up to fp32 reduction
// order: dropped pages weigh exactly 0, but with lists longer than one block the kernel's online
// softmax rescales at different chunk boundaries. |diff| ≤ 1e-6·(1 + |full|); observed: 0 when every
// list fits one chunk, ≤ 1.2e-7 with two-chunk lists.
TEST(McRouteEmuTest, ReadoutOnTheRoutedListsMatchesTheFullLists) {
  // V = 37: 64-thread blocks, every list in one chunk; V = 5: 32-thread blocks, 40-page lists in two.
  for (int64_t v : {37, 5}) {
    const Case c = RandomCase(/*t=*/30, /*hs=*/3, /*k=*/9, v, /*num_pages=*/40, 6, /*density=*/0.9);
    for (int top_k : {1, 3, 33}) {
      SCOPED_TRACE(testing::Message() << "V=" << v << " top_k=" << top_k);
      const RouteResult route = RunRoute(c, top_k, DeviceUnderTest());
      ASSERT_TRUE(route.status.ok()) << route.status;
      const Case routed = ReduceToSelection(c, route.selected, top_k);
      const ReadoutResult full = RunTopKReadout(c, top_k, DeviceUnderTest());
      const ReadoutResult staged = RunTopKReadout(routed, top_k, DeviceUnderTest());
      ASSERT_TRUE(full.status.ok() && staged.status.ok()) << full.status << " " << staged.status;
      float max_diff = 0.0f;
      for (size_t i = 0; i < full.out.size(); ++i) {
        max_diff = std::max(max_diff, std::fabs(full.out[i] - staged.out[i]));
      }
      std::printf("V=%d top_k=%d: max |full - routed| on cuda-emu = %g\n", static_cast<int>(v), top_k, max_diff);
      ExpectNear(staged.out, full.out, 1e-6f, "routed read-out");
    }
  }
}

TEST(McRouteEmuTest, RejectsBadInputOnCudaEmu) {
  Case c = RandomCase(/*t=*/3, /*hs=*/2, /*k=*/4, /*v=*/1, /*num_pages=*/2, 7);
  const Device dev = DeviceUnderTest();
  c.lists[0].push_back(2);  // page 2 of 2, in device memory
  RouteResult r = RunRoute(c, 1, dev);
  EXPECT_EQ(r.status.code(), absl::StatusCode::kInvalidArgument) << r.status;
  EXPECT_NE(r.status.message().find("token_pages[" + std::to_string(c.lists[0].size() - 1) + "] = 2 is out of range"),
            std::string::npos)
      << r.status;
  c.lists[0].pop_back();
  {
    RouteInputs in(c, 1, dev);
    in.args.top_k = 0;
    const absl::Status s = McRoute(Context{.device = dev}, in.args);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find("top_k = 0"), std::string::npos) << s;
  }
  {  // A pooled key left on the CPU while the call runs on the device under test.
    RouteInputs in(c, 1, dev);
    in.pooled[1] = *Tensor::FromHost(c.pooled[1], {c.hs, c.k}, Device::kCpu);
    const absl::Status s = McRoute(Context{.device = dev}, in.args);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find(std::string("pooled_keys[1] F32[2, 4] on cpu, but the context is on ") + DeviceName(dev)),
              std::string::npos)
        << s;
  }
  {  // The output on the CPU.
    RouteInputs in(c, 1, dev);
    in.selected = *Tensor::Zeros(DType::kI32, {c.t, c.hs, 1}, Device::kCpu);
    const absl::Status s = McRoute(Context{.device = dev}, in.args);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find("selected I32["), std::string::npos) << s;
  }
  RouteInputs ok(c, 1, dev);
  EXPECT_TRUE(McRoute(Context{.device = dev}, ok.args).ok());
}

}  // namespace
}  // namespace mcserve::kernels
