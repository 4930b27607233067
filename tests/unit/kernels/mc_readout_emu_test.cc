// McReadout on the CUDA emulator against the CPU backend: every combine kind, V not a multiple of the
// block size, page lists longer than one chunk (several online-softmax rescales), shared pages, empty
// lists, exact score ties under top-k, extreme scores, out aliasing online, no pages at all, both
// emulator schedules bit-identical, and validation on cuda-emu.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/emu/emu.h"
#include "kernels/mc_readout/mc_readout.h"
#include "mc_case.h"
#include "random_inputs.h"
#include "tests/unit/kernels/emu_test_device.h"

namespace mcserve::kernels {
namespace {

struct Options {
  McCombine kind = McCombine::kSoftmax;
  int top_k = 2;
  float online_weight = 1.0f, cached_weight = 1.0f;
};

struct Result {
  absl::Status status;
  std::vector<float> out;
};

// Runs one call on `dev`; out is a fresh zero tensor, or `online` itself when alias_online.
Result RunReadout(const Case& c, const Options& o, Device dev, bool alias_online = false) {
  Tensor q = *Tensor::FromHost(c.q, {c.t, c.hs, c.k}, dev);
  Tensor u = *Tensor::FromHost(c.u, {c.t, c.hs, c.k}, dev);
  Tensor pool_on = *Tensor::FromHost(c.pool_on, {c.t, c.hs, c.k}, dev);
  Tensor online = *Tensor::FromHost(c.online, {c.t, c.hs, c.v}, dev);
  Tensor out = *Tensor::Zeros(DType::kF32, {c.t, c.hs, c.v}, dev);
  std::vector<int32_t> off = {0}, idx;
  for (const auto& list : c.lists) {
    idx.insert(idx.end(), list.begin(), list.end());
    off.push_back(static_cast<int32_t>(idx.size()));
  }
  Tensor offsets = *Tensor::FromHostI32(off, {c.t + 1}, dev);
  Tensor token_pages = *Tensor::FromHostI32(idx, {static_cast<int64_t>(idx.size())}, dev);
  std::vector<Tensor> mem, pooled;
  for (size_t i = 0; i < c.mem.size(); ++i) {
    mem.push_back(*Tensor::FromHost(c.mem[i], {c.hs, c.k, c.v}, dev));
    pooled.push_back(*Tensor::FromHost(c.pooled[i], {c.hs, c.k}, dev));
  }
  std::vector<McPage> pages;
  for (size_t i = 0; i < mem.size(); ++i) pages.push_back({&mem[i], &pooled[i]});
  McReadoutArgs args;
  args.combine = o.kind;
  args.top_k = o.top_k;
  args.online_weight = o.online_weight;
  args.cached_weight = o.cached_weight;
  args.q = &q;
  args.u = &u;
  args.online_pool = &pool_on;
  args.online = &online;
  args.pages = pages;
  args.token_page_offsets = &offsets;
  args.token_pages = &token_pages;
  args.out = alias_online ? &online : &out;
  Result r;
  r.status = McReadout(Context{.device = dev}, args);
  r.out = *args.out->ToHostF32();
  return r;
}

// fp32 reduction order differs (the kernel's online softmax rescales a running sum and divides at
// the end; the CPU normalises the weights first), so: |got − want| ≤ 1e-5·(1 + |want|) (observed < 3e-6).
constexpr float kTol = 1e-5f;

// Runs on the CPU and on cuda-emu under both schedules; compares; returns the emulated output.
std::vector<float> CheckAgainstCpu(const Case& c, const Options& o, bool alias_online = false) {
  const Result cpu = RunReadout(c, o, Device::kCpu, alias_online);
  EXPECT_TRUE(cpu.status.ok()) << cpu.status;
  auto [fwd, rev] = RunSchedules([&] { return RunReadout(c, o, DeviceUnderTest(), alias_online); });
  EXPECT_TRUE(fwd.status.ok()) << fwd.status;
  EXPECT_TRUE(rev.status.ok()) << rev.status;
  EXPECT_EQ(fwd.out, rev.out) << "schedules differ";
  EXPECT_EQ(fwd.out.size(), cpu.out.size());
  for (size_t i = 0; i < std::min(fwd.out.size(), cpu.out.size()); ++i) {
    EXPECT_NEAR(fwd.out[i], cpu.out[i], kTol * (1.0f + std::fabs(cpu.out[i])))
        << "element " << i << " (token " << i / (c.hs * c.v) << ")";
    if (::testing::Test::HasFailure()) break;
  }
  return fwd.out;
}

TEST(McReadoutEmuTest, EveryCombineKind) {
  const Case c = RandomCase(/*t=*/11, /*hs=*/2, /*k=*/19, /*v=*/37, /*num_pages=*/5, 1);
  CheckAgainstCpu(c, {.kind = McCombine::kSum});
  CheckAgainstCpu(c, {.kind = McCombine::kSum, .online_weight = 0.5f, .cached_weight = 0.25f});
  CheckAgainstCpu(c, {.kind = McCombine::kSum, .online_weight = 2.0f, .cached_weight = 0.0f});
  CheckAgainstCpu(c, {.kind = McCombine::kSoftmax});
  for (int top_k : {1, 2, 3, 100}) CheckAgainstCpu(c, {.kind = McCombine::kTopKSoftmax, .top_k = top_k});
}

TEST(McReadoutEmuTest, LongPageListsSpanSeveralChunks) {
  // V = 5: 32-thread blocks, so 40 pages per token take two chunks of the online softmax.
  const Case c = RandomCase(/*t=*/4, /*hs=*/2, /*k=*/9, /*v=*/5, /*num_pages=*/40, 2, /*density=*/0.95);
  CheckAgainstCpu(c, {.kind = McCombine::kSum});
  CheckAgainstCpu(c, {.kind = McCombine::kSoftmax});
  for (int top_k : {1, 5, 33, 39}) CheckAgainstCpu(c, {.kind = McCombine::kTopKSoftmax, .top_k = top_k});
}

TEST(McReadoutEmuTest, WideValuesStrideOverThreads) {
  const Case c = RandomCase(/*t=*/2, /*hs=*/1, /*k=*/7, /*v=*/300, /*num_pages=*/3, 3);
  CheckAgainstCpu(c, {.kind = McCombine::kSoftmax});
  CheckAgainstCpu(c, {.kind = McCombine::kTopKSoftmax, .top_k = 1});
}

TEST(McReadoutEmuTest, TopKTiesGoToTheLowerListPosition) {
  Case c = RandomCase(/*t=*/6, /*hs=*/2, /*k=*/8, /*v=*/6, /*num_pages=*/6, 4, /*density=*/1.0);
  for (int i = 1; i < 6; ++i) c.pooled[i] = c.pooled[i % 2];  // scores tie in two groups of three
  for (int top_k : {1, 2, 4}) CheckAgainstCpu(c, {.kind = McCombine::kTopKSoftmax, .top_k = top_k});
  // top_k = 1 reads, per head, the first listed page of the higher-scoring group only: replacing the
  // memories of all other pages must not change token 0's output (a later tied page, or any
  // dropped page being read, would).
  Case one = c;
  one.t = 1;
  one.q.resize(c.hs * c.k);
  one.u.resize(c.hs * c.k);
  one.pool_on.resize(c.hs * c.k);
  one.online.resize(c.hs * c.v);
  one.lists = {c.lists[0]};
  Case swapped = one;
  for (int p = 0; p < 6; ++p) swapped.mem[p] = RandomVector(c.hs * c.k * c.v, 900 + p);
  for (int g = 0; g < 2; ++g) {
    for (int32_t p : one.lists[0]) {
      if (p % 2 == g) {
        swapped.mem[p] = c.mem[p];
        break;
      }
    }
  }
  const Options o{.kind = McCombine::kTopKSoftmax, .top_k = 1};
  const Result r1 = RunReadout(one, o, DeviceUnderTest()), r2 = RunReadout(swapped, o, DeviceUnderTest());
  ASSERT_TRUE(r1.status.ok() && r2.status.ok());
  EXPECT_EQ(r1.out, r2.out);
  // ...while replacing the first listed page of each group does.
  Case changed = one;
  for (int32_t p : one.lists[0]) changed.mem[p] = RandomVector(c.hs * c.k * c.v, 950 + p);
  EXPECT_NE(RunReadout(changed, o, DeviceUnderTest()).out, r1.out);
}

TEST(McReadoutEmuTest, ExtremeScoresAndAliasing) {
  Case c = RandomCase(/*t=*/5, /*hs=*/2, /*k=*/16, /*v=*/33, /*num_pages=*/4, 5);
  for (float& x : c.u) x *= 60.0f;  // scores of several hundred: most exps underflow to 0
  for (McCombine kind : {McCombine::kSoftmax, McCombine::kTopKSoftmax}) {
    const std::vector<float> got = CheckAgainstCpu(c, {.kind = kind, .top_k = 2});
    for (float y : got) ASSERT_TRUE(std::isfinite(y));
    CheckAgainstCpu(c, {.kind = kind, .top_k = 2}, /*alias_online=*/true);
  }
  CheckAgainstCpu(c, {.kind = McCombine::kSum, .online_weight = 0.5f}, /*alias_online=*/true);
}

TEST(McReadoutEmuTest, NoPagesGivesTheOnlineReadOut) {
  const Case c = RandomCase(/*t=*/3, /*hs=*/2, /*k=*/4, /*v=*/7, /*num_pages=*/0, 6);
  for (McCombine kind : {McCombine::kSoftmax, McCombine::kTopKSoftmax}) {
    const Result r = RunReadout(c, {.kind = kind}, DeviceUnderTest());
    ASSERT_TRUE(r.status.ok()) << r.status;
    EXPECT_EQ(r.out, c.online);  // γ_on is exactly 1
  }
  const Result r = RunReadout(c, {.kind = McCombine::kSum, .online_weight = 0.5f}, DeviceUnderTest());
  ASSERT_TRUE(r.status.ok()) << r.status;
  for (size_t i = 0; i < r.out.size(); ++i) EXPECT_EQ(r.out[i], 0.5f * c.online[i]);
}

TEST(McReadoutEmuTest, RejectsBadInputOnCudaEmu) {
  Case c = RandomCase(/*t=*/3, /*hs=*/1, /*k=*/4, /*v=*/4, /*num_pages=*/2, 7);
  c.lists[0].push_back(2);  // page 2 of 2
  Result r = RunReadout(c, {.kind = McCombine::kSoftmax}, DeviceUnderTest());
  EXPECT_EQ(r.status.code(), absl::StatusCode::kInvalidArgument) << r.status;
  EXPECT_NE(r.status.message().find("token_pages"), std::string::npos) << r.status;
  c.lists[0].pop_back();
  r = RunReadout(c, {.kind = McCombine::kTopKSoftmax, .top_k = 0}, DeviceUnderTest());
  EXPECT_EQ(r.status.code(), absl::StatusCode::kInvalidArgument) << r.status;
  // A page left on the CPU while the call runs on cuda-emu.
  const Device dev = DeviceUnderTest();
  Tensor q = *Tensor::Zeros(DType::kF32, {1, 1, 4}, dev), online = *Tensor::Zeros(DType::kF32, {1, 1, 4}, dev);
  Tensor out = *Tensor::Zeros(DType::kF32, {1, 1, 4}, dev);
  Tensor mem = *Tensor::Zeros(DType::kF32, {1, 4, 4}, Device::kCpu);
  const int32_t off[2] = {0, 1}, idx = 0;
  Tensor off_t = *Tensor::FromHostI32(off, {2}, dev), idx_t = *Tensor::FromHostI32({&idx, 1}, {1}, dev);
  const McPage page{.memory = &mem};
  McReadoutArgs args;
  args.combine = McCombine::kSum;
  args.q = &q;
  args.online = &online;
  args.pages = {&page, 1};
  args.token_page_offsets = &off_t;
  args.token_pages = &idx_t;
  args.out = &out;
  const absl::Status s = McReadout(Context{.device = dev}, args);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
}

}  // namespace
}  // namespace mcserve::kernels
