// DeepMcReadout on the CUDA emulator against the CPU backend: every combine kind (Residual with two
// weight pairs, GRM, SSC with several k, Soup by activation mixing) with and without the layer norm,
// page weight scales, shared pages and empty lists, a d = 64 head, extreme scores, out aliasing
// online, no pages, σ = SiLU, both emulator schedules bit-identical, soup's device-side slot check and
// validation on cuda-emu.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "emu_test_util.h"
#include "gtest/gtest.h"
#include "kernels/deep_memory/deep_mc_readout.h"
#include "deep_case.h"
#include "random_inputs.h"

namespace mcserve::kernels {
namespace {

using deep_case::Case;

// deep_case's inputs, with soup's tokens as three sequences on slots {3, 1, 0}, the middle one empty.
Case RandomCase(int64_t t, int64_t h, int64_t d, int num_pages, bool ln, uint32_t seed, double density = 0.7) {
  Case c = deep_case::RandomCase(t, h, d, num_pages, ln, seed, density);
  c.lens = {static_cast<int32_t>(t / 2), 0, static_cast<int32_t>(t - t / 2)};
  c.slot_ids = {3, 1, 0};
  return c;
}

struct Options {
  DeepMcCombine kind = DeepMcCombine::kSoftmax;
  int top_k = 2;
  float online_weight = 1.0f, cached_weight = 1.0f;
  DeepMcActivation activation = DeepMcActivation::kGelu;
};

struct Result {
  absl::Status status;
  std::vector<float> out;
};

// One call on `dev`; out is a fresh zero tensor, or `online` itself when alias_online.
Result RunReadout(const Case& c, const Options& o, Device dev, bool alias_online = false) {
  const int64_t t = c.t, h = c.h, d = c.d;
  auto f32 = [&](const std::vector<float>& v, Shape s) { return *Tensor::FromHost(v, std::move(s), dev); };
  auto i32 = [&](const std::vector<int32_t>& v) {
    return *Tensor::FromHostI32(v, {static_cast<int64_t>(v.size())}, dev);
  };
  Tensor q = f32(c.q, {t, h, d}), u = f32(c.u, {t, h, d}), pool_on = f32(c.pool_on, {t, h, d});
  Tensor online = f32(c.online, {t, h, d}), out = *Tensor::Zeros(DType::kF32, {t, h, d}, dev);
  std::vector<int32_t> off = {0}, idx, cu = {0};
  for (const auto& list : c.lists) {
    idx.insert(idx.end(), list.begin(), list.end());
    off.push_back(static_cast<int32_t>(idx.size()));
  }
  for (int32_t n : c.lens) cu.push_back(cu.back() + n);
  Tensor offsets = i32(off), token_pages = i32(idx), cut = i32(cu), slots = i32(c.slot_ids);
  Tensor online_memory = f32(c.online_memory, {c.slots, h, c.p()});
  Tensor ln_w = c.ln ? f32(c.ln_w, {h, d}) : Tensor(), ln_b = c.ln ? f32(c.ln_b, {h, d}) : Tensor();
  std::vector<Tensor> mem, pooled;
  for (size_t i = 0; i < c.mem.size(); ++i) {
    mem.push_back(f32(c.mem[i], {h, c.p()}));
    pooled.push_back(f32(c.pooled[i], {h, d}));
  }
  std::vector<DeepMcPage> pages;
  for (size_t i = 0; i < mem.size(); ++i) pages.push_back({&mem[i], &pooled[i], c.scale[i]});
  DeepMcReadoutArgs args;
  args.combine = o.kind;
  args.activation = o.activation;
  args.expansion = static_cast<int>(c.x);
  args.top_k = o.top_k;
  args.online_weight = o.online_weight;
  args.cached_weight = o.cached_weight;
  if (c.ln) {
    args.ln_weight = &ln_w;
    args.ln_bias = &ln_b;
  }
  args.q = &q;
  args.u = &u;  // ignored by kSum
  args.online_pool = &pool_on;
  args.online = &online;                // kSoup: rows without pages keep it
  args.online_memory = &online_memory;  // these two: ignored by all but kSoup
  args.layout = {&cut, &slots};
  args.pages = pages;
  args.token_page_offsets = &offsets;
  args.token_pages = &token_pages;
  args.out = alias_online ? &online : &out;
  Result r;
  r.status = DeepMcReadout(Context{.device = dev}, args);
  r.out = *args.out->ToHostF32();
  return r;
}

// Dot products sum in another order on the device; measured differences are a few ulps.
constexpr float kTol = 1e-5f;

// Runs on the CPU and on the device under test under both schedules; compares; returns the device's.
std::vector<float> CheckAgainstCpu(const Case& c, const Options& o, const std::string& what,
                                   bool alias_online = false) {
  SCOPED_TRACE(what);
  const Result cpu = RunReadout(c, o, Device::kCpu, alias_online);
  EXPECT_TRUE(cpu.status.ok()) << cpu.status;
  auto [fwd, rev] = RunSchedules([&] { return RunReadout(c, o, DeviceUnderTest(), alias_online); });
  EXPECT_TRUE(fwd.status.ok()) << fwd.status;
  EXPECT_TRUE(rev.status.ok()) << rev.status;
  EXPECT_EQ(fwd.out, rev.out) << "schedules differ";
  ExpectNear(fwd.out, cpu.out, kTol, what.c_str());
  return fwd.out;
}

std::vector<Options> AllOptions() {
  return {{.kind = DeepMcCombine::kSum},
          {.kind = DeepMcCombine::kSum, .online_weight = 0.5f, .cached_weight = 0.25f},
          {.kind = DeepMcCombine::kSoftmax},
          {.kind = DeepMcCombine::kTopKSoftmax, .top_k = 1},
          {.kind = DeepMcCombine::kTopKSoftmax, .top_k = 3},
          {.kind = DeepMcCombine::kSoup}};
}

// σ = SiLU (HOPE's M_mem) for every kind, decode and prefill sizes, with and without the layer norm.
TEST(DeepMcReadoutEmuTest, EveryKindWithSiluMatchesCpu) {
  for (bool ln : {false, true}) {
    for (int64_t t : {3, 21}) {
      const Case c = RandomCase(t, /*h=*/2, /*d=*/8, /*num_pages=*/4, ln, 90 + static_cast<uint32_t>(t));
      for (Options o : AllOptions()) {
        o.activation = DeepMcActivation::kSilu;
        CheckAgainstCpu(c, o, "silu kind " + std::to_string(static_cast<int>(o.kind)) + " t=" + std::to_string(t));
      }
    }
  }
}

TEST(DeepMcReadoutEmuTest, EveryKindMatchesCpu) {
  for (bool ln : {false, true}) {
    // d = 12, e = 48: two warps, the second partly idle on rows.
    const Case c = RandomCase(/*t=*/7, /*h=*/2, /*d=*/12, /*num_pages=*/4, ln, ln ? 2 : 1);
    for (const Options& o : AllOptions()) {
      CheckAgainstCpu(c, o, "kind " + std::to_string(static_cast<int>(o.kind)) + " top_k " + std::to_string(o.top_k) +
                                (ln ? " ln" : ""));
    }
  }
}

TEST(DeepMcReadoutEmuTest, LargeHeadMatchesCpu) {
  const Case c = RandomCase(/*t=*/2, /*h=*/1, /*d=*/64, /*num_pages=*/2, true, 3, /*density=*/1.0);
  for (DeepMcCombine kind : {DeepMcCombine::kSoftmax, DeepMcCombine::kSoup}) {
    CheckAgainstCpu(c, {.kind = kind}, "d64 kind " + std::to_string(static_cast<int>(kind)));
  }
}

TEST(DeepMcReadoutEmuTest, ExtremeScoresAndAliasing) {
  Case c = RandomCase(/*t=*/5, /*h=*/2, /*d=*/8, /*num_pages=*/4, true, 4);
  for (float& x : c.u) x *= 60.0f;  // scores of several hundred: most exps underflow to 0
  for (DeepMcCombine kind : {DeepMcCombine::kSoftmax, DeepMcCombine::kTopKSoftmax, DeepMcCombine::kSoup}) {
    const std::vector<float> got = CheckAgainstCpu(c, {.kind = kind, .top_k = 2}, "extreme");
    for (float y : got) ASSERT_TRUE(std::isfinite(y));
  }
  for (const Options& o : AllOptions()) CheckAgainstCpu(c, o, "alias", /*alias_online=*/true);
}

TEST(DeepMcReadoutEmuTest, NoPagesGivesTheOnlineMemory) {
  const Case c = RandomCase(/*t=*/3, /*h=*/2, /*d=*/8, /*num_pages=*/0, false, 5);
  for (DeepMcCombine kind : {DeepMcCombine::kSoftmax, DeepMcCombine::kTopKSoftmax}) {
    const Result r = RunReadout(c, {.kind = kind}, DeviceUnderTest());
    ASSERT_TRUE(r.status.ok()) << r.status;
    EXPECT_EQ(r.out, c.online);  // γ_on is exactly 1
  }
  CheckAgainstCpu(c, {.kind = DeepMcCombine::kSoup}, "soup without pages");
  CheckAgainstCpu(c, {.kind = DeepMcCombine::kSum, .online_weight = 0.5f}, "sum without pages");
}

// Soup's layout lives on the device: a sequence on a slot outside [0, num_slots) gets NaN outputs.
TEST(DeepMcReadoutEmuTest, SoupBadSlotGivesNaN) {
  Case c = RandomCase(/*t=*/4, /*h=*/1, /*d=*/8, /*num_pages=*/2, false, 6);
  const Result ok = RunReadout(c, {.kind = DeepMcCombine::kSoup}, DeviceUnderTest());
  ASSERT_TRUE(ok.status.ok()) << ok.status;
  c.slot_ids = {3, 1, 9};
  const Result r = RunReadout(c, {.kind = DeepMcCombine::kSoup}, DeviceUnderTest());
  ASSERT_TRUE(r.status.ok()) << r.status;
  int nan_rows = 0;
  for (int64_t i = 0; i < c.t * c.d; ++i) {
    if (i < c.lens[0] * c.d) {
      EXPECT_EQ(r.out[i], ok.out[i]) << i;
    } else if (c.lists[i / c.d].empty()) {  // reads no page: keeps online, never touches the slot
      EXPECT_EQ(r.out[i], c.online[i]) << i;
    } else {
      EXPECT_TRUE(std::isnan(r.out[i])) << i;
      nan_rows += i % c.d == 0;
    }
  }
  EXPECT_GT(nan_rows, 0);
}

TEST(DeepMcReadoutEmuTest, RejectsBadInputOnCudaEmu) {
  Case c = RandomCase(/*t=*/3, /*h=*/1, /*d=*/4, /*num_pages=*/2, false, 7);
  c.lists[0].push_back(2);  // page 2 of 2
  Result r = RunReadout(c, {.kind = DeepMcCombine::kSoftmax}, DeviceUnderTest());
  EXPECT_EQ(r.status.code(), absl::StatusCode::kInvalidArgument) << r.status;
  EXPECT_NE(r.status.message().find("token_pages"), std::string::npos) << r.status;
  c.lists[0].pop_back();
  r = RunReadout(c, {.kind = DeepMcCombine::kTopKSoftmax, .top_k = 0}, DeviceUnderTest());
  EXPECT_EQ(r.status.code(), absl::StatusCode::kInvalidArgument) << r.status;
  // A page left on the CPU while the call runs on the device.
  const Device dev = DeviceUnderTest();
  Tensor q = *Tensor::Zeros(DType::kF32, {1, 1, 4}, dev), online = *Tensor::Zeros(DType::kF32, {1, 1, 4}, dev);
  Tensor out = *Tensor::Zeros(DType::kF32, {1, 1, 4}, dev), mem = *Tensor::Zeros(DType::kF32, {1, 128}, Device::kCpu);
  const int32_t off[2] = {0, 1}, idx = 0;
  Tensor off_t = *Tensor::FromHostI32(off, {2}, dev), idx_t = *Tensor::FromHostI32({&idx, 1}, {1}, dev);
  const DeepMcPage page{.memory = &mem};
  DeepMcReadoutArgs args;
  args.combine = DeepMcCombine::kSum;
  args.q = &q;
  args.online = &online;
  args.pages = {&page, 1};
  args.token_page_offsets = &off_t;
  args.token_pages = &idx_t;
  args.out = &out;
  const absl::Status s = DeepMcReadout(Context{.device = dev}, args);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("pages[0].memory"), std::string::npos) << s;
}

}  // namespace
}  // namespace mcserve::kernels
