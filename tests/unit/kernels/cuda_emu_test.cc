// Tests of the CUDA emulator (kernels/cuda/emu/): indexing, barriers, the two schedules and the
// race they expose, warp collectives, atomics, dynamic shared memory, deadlock and launch errors.
#define MCSERVE_CUDA_EMU 1

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <numeric>
#include <random>
#include <vector>

#include "tests/unit/kernels/cuda_emu_test_kernels.h"

namespace mcserve::kernels {
namespace {

using emu::Schedule;
using emu::ScopedSchedule;
namespace t = cuda_emu_test;

constexpr Schedule kSchedules[] = {Schedule::kForward, Schedule::kReverse};

// Runs `launch` (which launches and returns TakeLaunchStatus) on another OS thread and fails the
// whole binary if it does not finish within 30 s: a hang must not stall CI.
absl::Status WithWatchdog(std::function<absl::Status()> launch) {
  auto fut = std::async(std::launch::async, std::move(launch));
  if (fut.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
    std::fprintf(stderr, "cuda_emu_test: launch hung\n");
    std::_Exit(1);
  }
  return fut.get();
}

std::vector<float> RandomFloats(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Kernels launch on KernelStream(), the device runtime's native stream: none under the emulator.
TEST(CudaEmuTest, KernelStreamIsTheRuntimesNativeStreamNullUnderTheEmulator) {
  const absl::StatusOr<cudaStream_t> stream = cuda_emu::KernelStream();
  ASSERT_TRUE(stream.ok()) << stream.status();
  EXPECT_EQ(*stream, nullptr);
  EXPECT_EQ((*RuntimeFor(Device::kCudaEmu))->native_stream(), nullptr);
}

TEST(CudaEmuTest, IndicesCoverA3dGridExactlyOnce) {
  const int nx = 37, ny = 5, nz = 3;
  const dim3 block(8, 2, 2);
  const dim3 grid((nx + 7) / 8, (ny + 1) / 2, (nz + 1) / 2);
  for (Schedule s : kSchedules) {
    ScopedSchedule scoped(s);
    std::vector<int> hits(nx * ny * nz, 0), coords(3 * nx * ny * nz, -1);
    std::vector<unsigned> dims(6, 0);
    MCSERVE_LAUNCH(t::IndexKernel, grid, block, 0, nullptr)(nx, ny, nz, hits.data(), coords.data(),
                                                            dims.data());
    ASSERT_TRUE(cuda_emu::TakeLaunchStatus("IndexKernel").ok());
    for (int z = 0; z < nz; ++z) {
      for (int y = 0; y < ny; ++y) {
        for (int x = 0; x < nx; ++x) {
          const int i = (z * ny + y) * nx + x;
          ASSERT_EQ(hits[i], 1) << x << "," << y << "," << z;
          EXPECT_EQ(coords[3 * i], x);
          EXPECT_EQ(coords[3 * i + 1], y);
          EXPECT_EQ(coords[3 * i + 2], z);
        }
      }
    }
    EXPECT_EQ(dims, (std::vector<unsigned>{8, 2, 2, 5, 3, 2}));
  }
}

TEST(CudaEmuTest, IndicesCoverA1dGridWithIntDims) {
  const int n = 1000;
  std::vector<int> hits(n, 0), coords(3 * n, -1);
  std::vector<unsigned> dims(6, 0);
  MCSERVE_LAUNCH(t::IndexKernel, (n + 127) / 128, 128, 0, 0)(n, 1, 1, hits.data(), coords.data(),
                                                             dims.data());
  ASSERT_TRUE(cuda_emu::TakeLaunchStatus("IndexKernel").ok());
  for (int i = 0; i < n; ++i) ASSERT_EQ(hits[i], 1) << i;
  EXPECT_EQ(dims, (std::vector<unsigned>{128, 1, 1, 8, 1, 1}));
}

// The reduction's exact float result: the same tree, in the same order, on the host.
std::vector<float> HostTreeReduce(const std::vector<float>& in, int blocks) {
  std::vector<float> out(blocks);
  for (int b = 0; b < blocks; ++b) {
    float s[t::kReduceThreads];
    for (int i = 0; i < t::kReduceThreads; ++i) {
      const int g = b * t::kReduceThreads + i;
      s[i] = g < static_cast<int>(in.size()) ? in[g] : 0.0f;
    }
    for (int stride = t::kReduceThreads / 2; stride > 0; stride >>= 1) {
      for (int i = 0; i < stride; ++i) s[i] += s[i + stride];
    }
    out[b] = s[0];
  }
  return out;
}

std::vector<float> RunReduce(void (*kernel)(const float*, int, float*), const std::vector<float>& in,
                             Schedule s) {
  ScopedSchedule scoped(s);
  const int n = static_cast<int>(in.size());
  const int blocks = (n + t::kReduceThreads - 1) / t::kReduceThreads;
  std::vector<float> out(blocks, 0.0f);
  MCSERVE_LAUNCH(kernel, blocks, t::kReduceThreads, 0, nullptr)(in.data(), n, out.data());
  EXPECT_TRUE(cuda_emu::TakeLaunchStatus("reduce").ok());
  return out;
}

TEST(CudaEmuTest, ReductionWithBarriersIsExactUnderBothSchedules) {
  const std::vector<float> in = RandomFloats(1000, 1);
  const std::vector<float> expected = HostTreeReduce(in, 4);
  const std::vector<float> fwd = RunReduce(&t::ReduceKernel, in, Schedule::kForward);
  const std::vector<float> rev = RunReduce(&t::ReduceKernel, in, Schedule::kReverse);
  ASSERT_EQ(fwd.size(), 4u);
  EXPECT_EQ(std::memcmp(fwd.data(), rev.data(), fwd.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(fwd.data(), expected.data(), fwd.size() * sizeof(float)), 0);
  double total = 0;
  for (float x : in) total += x;
  EXPECT_NEAR(fwd[0] + fwd[1] + fwd[2] + fwd[3], total, 1e-3);
}

TEST(CudaEmuTest, MissingBarrierGivesDifferentResultsUnderTheTwoSchedules) {
  const std::vector<float> in = RandomFloats(1000, 2);
  const std::vector<float> fwd = RunReduce(&t::RacyReduceKernel, in, Schedule::kForward);
  const std::vector<float> rev = RunReduce(&t::RacyReduceKernel, in, Schedule::kReverse);
  ASSERT_EQ(fwd.size(), rev.size());
  EXPECT_NE(std::memcmp(fwd.data(), rev.data(), fwd.size() * sizeof(float)), 0)
      << "the race on shared memory went unnoticed";
}

TEST(CudaEmuTest, WarpShufflesWithFullAndPartialMasks) {
  const int n = 64;  // two warps
  std::vector<float> in(n);
  for (int i = 0; i < n; ++i) in[i] = static_cast<float>((i * 37) % 11 - 5);  // small integers: exact
  for (Schedule s : kSchedules) {
    ScopedSchedule scoped(s);
    std::vector<float> out(6 * n, 0.0f);
    MCSERVE_LAUNCH(t::WarpShuffleKernel, 1, n, 0, nullptr)(in.data(), out.data());
    ASSERT_TRUE(cuda_emu::TakeLaunchStatus("WarpShuffleKernel").ok());
    for (int i = 0; i < n; ++i) {
      const int base = i / 32 * 32, lane = i % 32;
      float warp_sum = 0, prefix = 0, half_sum = 0;
      for (int j = 0; j < 32; ++j) warp_sum += in[base + j];
      for (int j = 0; j <= lane; ++j) prefix += in[base + j];
      for (int j = 0; j < 16; ++j) half_sum += in[base + j];
      EXPECT_EQ(out[i], warp_sum) << "xor, thread " << i;
      if (lane == 0) {
        EXPECT_EQ(out[n + i], warp_sum) << "down, thread " << i;
      }
      EXPECT_EQ(out[2 * n + i], prefix) << "up-scan, thread " << i;
      EXPECT_EQ(out[3 * n + i], in[base + 5]) << "broadcast, thread " << i;
      EXPECT_EQ(out[4 * n + i], in[base + lane / 8 * 8 + 2]) << "width 8, thread " << i;
      EXPECT_EQ(out[5 * n + i], lane < 16 ? half_sum : -1.0f) << "mask 0xffff, thread " << i;
    }
  }
}

TEST(CudaEmuTest, ShuffleMovesWhole64BitValues) {
  std::vector<double> in(32), out(32, 0.0);
  for (int i = 0; i < 32; ++i) in[i] = 1.0 + i * 1e-12;  // needs all 64 bits
  MCSERVE_LAUNCH(t::ShuffleDoubleKernel, 1, 32, 0, nullptr)(in.data(), out.data());
  ASSERT_TRUE(cuda_emu::TakeLaunchStatus("ShuffleDoubleKernel").ok());
  for (int i = 0; i < 32; ++i) EXPECT_EQ(out[i], in[i ^ 1]);
}

TEST(CudaEmuTest, VotesWithFullAndPartialMasksAndAPartialWarp) {
  const int n = 40;  // warp 1 has 8 lanes: a full mask must work there
  std::vector<int> pred(n);
  for (int i = 0; i < n; ++i) pred[i] = (i % 5 == 0) ? 1 : 0;
  pred[32 + 1] = 1;
  for (Schedule s : kSchedules) {
    ScopedSchedule scoped(s);
    std::vector<unsigned> out(6 * n, 12345);
    MCSERVE_LAUNCH(t::VoteKernel, 1, n, 0, nullptr)(pred.data(), out.data());
    ASSERT_TRUE(cuda_emu::TakeLaunchStatus("VoteKernel").ok());
    for (int i = 0; i < n; ++i) {
      const int base = i / 32 * 32, lanes = std::min(32, n - base), lane = i % 32;
      unsigned ballot = 0, odd = 0;
      for (int j = 0; j < lanes; ++j) {
        if (pred[base + j]) ballot |= 1u << j;
        if ((j & 1) && j % 3 == 0) odd |= 1u << j;
      }
      const unsigned existing = lanes == 32 ? 0xffffffffu : (1u << lanes) - 1;
      EXPECT_EQ(out[i], ballot) << "ballot, thread " << i;
      EXPECT_EQ(out[n + i], ballot != 0 ? 1u : 0u) << "any, thread " << i;
      EXPECT_EQ(out[2 * n + i], ballot == existing ? 1u : 0u) << "all, thread " << i;
      EXPECT_EQ(out[3 * n + i], (lane & 1) ? odd & existing : 0u) << "odd ballot, thread " << i;
      EXPECT_EQ(out[4 * n + i], existing) << "activemask, thread " << i;
      EXPECT_EQ(out[5 * n + i], lane < 16 ? existing & 0xffffu : 0u)
          << "diverged activemask, thread " << i;
    }
  }
  // Sanity of the expectations: warp 0 has lanes 0, 5, ..., 30 set; warp 1 lanes 1 and 3 of 8.
  std::vector<unsigned> out(6 * n);
  MCSERVE_LAUNCH(t::VoteKernel, 1, n, 0, nullptr)(pred.data(), out.data());
  EXPECT_EQ(out[0], 0x42108421u);
  EXPECT_EQ(out[32], 0x0000000au);
}

TEST(CudaEmuTest, AtomicsFromManyThreads) {
  const int blocks = 4, threads = 256, total = blocks * threads;
  int i_sum = 0, i_max = -1, i_min = 1 << 30, exch = -1;
  unsigned u_sum = 0;
  float f_sum = 0.0f;
  unsigned long long cas_sum = 0;
  std::vector<int> exch_old(total, -7);
  MCSERVE_LAUNCH(t::AtomicsKernel, blocks, threads, 0, nullptr)(&i_sum, &u_sum, &f_sum, &i_max,
                                                                &i_min, &cas_sum, &exch,
                                                                exch_old.data());
  ASSERT_TRUE(cuda_emu::TakeLaunchStatus("AtomicsKernel").ok());
  EXPECT_EQ(i_sum, total * (total - 1) / 2);
  EXPECT_EQ(u_sum, static_cast<unsigned>(total));
  EXPECT_EQ(f_sum, static_cast<float>(total));
  EXPECT_EQ(i_max, 999);
  EXPECT_EQ(i_min, 500 - (total - 1));
  EXPECT_EQ(cas_sum, static_cast<unsigned long long>(total) * (total - 1) / 2);
  // atomicExch hands every value on exactly once: the olds plus the final value are {-1, 0..N-1}.
  std::vector<int> seen = exch_old;
  seen.push_back(exch);
  std::sort(seen.begin(), seen.end());
  std::vector<int> expected(total + 1);
  std::iota(expected.begin(), expected.end(), -1);
  EXPECT_EQ(seen, expected);
}

TEST(CudaEmuTest, DynamicSharedMemory) {
  const int n = 300, threads = 128, blocks = 3;
  const std::vector<float> in = RandomFloats(n, 3);
  for (Schedule s : kSchedules) {
    ScopedSchedule scoped(s);
    std::vector<float> out(n, 0.0f);
    std::vector<int> counts(blocks, 0);
    MCSERVE_LAUNCH(t::DynamicSharedKernel, blocks, threads, threads * sizeof(float) + sizeof(int),
                   nullptr)(in.data(), n, out.data(), counts.data());
    ASSERT_TRUE(cuda_emu::TakeLaunchStatus("DynamicSharedKernel").ok());
    for (int g = 0; g < n; ++g) {
      const int mirror = g / threads * threads + (threads - 1 - g % threads);
      EXPECT_EQ(out[g], mirror < n ? in[mirror] : 0.0f) << g;
    }
    EXPECT_EQ(counts, std::vector<int>(blocks, threads));
  }
}

TEST(CudaEmuTest, UninitializedDynamicSharedMemoryDiffersBetweenSchedules) {
  std::vector<unsigned> fwd(32), rev(32);
  {
    ScopedSchedule scoped(Schedule::kForward);
    MCSERVE_LAUNCH(t::UninitializedSharedKernel, 1, 32, 32 * sizeof(unsigned), nullptr)(fwd.data());
  }
  {
    ScopedSchedule scoped(Schedule::kReverse);
    MCSERVE_LAUNCH(t::UninitializedSharedKernel, 1, 32, 32 * sizeof(unsigned), nullptr)(rev.data());
  }
  ASSERT_TRUE(cuda_emu::TakeLaunchStatus("UninitializedSharedKernel").ok());
  EXPECT_NE(fwd, rev);
}

TEST(CudaEmuTest, SyncThreadsCountAndOr) {
  std::vector<int> out(3, -1);
  MCSERVE_LAUNCH(t::SyncCountKernel, 1, 100, 0, nullptr)(out.data());
  ASSERT_TRUE(cuda_emu::TakeLaunchStatus("SyncCountKernel").ok());
  EXPECT_EQ(out, (std::vector<int>{50, 0, 1}));
}

TEST(CudaEmuTest, BarrierAfterEarlyExitIsReportedAsDeadlock) {
  const absl::Status s = WithWatchdog([] {
    std::vector<int> out(32, 0);
    MCSERVE_LAUNCH(t::EarlyExitBarrierKernel, 2, 32, 0, nullptr)(out.data());
    return cuda_emu::TakeLaunchStatus("EarlyExitBarrierKernel");
  });
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("EarlyExitBarrierKernel: "), std::string::npos) << s;
  EXPECT_NE(s.message().find("deadlock"), std::string::npos) << s;
  EXPECT_NE(s.message().find("exited"), std::string::npos) << s;
  // The emulator recovers: the next launch runs normally, and the error was consumed.
  EXPECT_TRUE(cuda_emu::TakeLaunchStatus("none").ok());
  const std::vector<float> in = RandomFloats(500, 4);
  EXPECT_EQ(RunReduce(&t::ReduceKernel, in, Schedule::kForward), HostTreeReduce(in, 2));
}

TEST(CudaEmuTest, ShuffleAgainstBarrierIsReportedAsDeadlock) {
  for (Schedule sched : kSchedules) {
    const absl::Status s = WithWatchdog([sched] {
      ScopedSchedule scoped(sched);
      std::vector<int> out(32, 0);
      MCSERVE_LAUNCH(t::ShuffleVersusBarrierKernel, 1, 32, 0, nullptr)(out.data());
      return cuda_emu::TakeLaunchStatus("ShuffleVersusBarrierKernel");
    });
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("deadlock"), std::string::npos) << s;
    EXPECT_NE(s.message().find("__shfl_sync"), std::string::npos) << s;
  }
}

TEST(CudaEmuTest, CrossBlockSpinIsReportedAsLivelock) {
  const absl::Status s = WithWatchdog([] {
    int flag = 0;
    MCSERVE_LAUNCH(t::CrossBlockSpinKernel, 2, 32, 0, nullptr)(&flag);
    return cuda_emu::TakeLaunchStatus("CrossBlockSpinKernel");
  });
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("livelock"), std::string::npos) << s;
}

TEST(CudaEmuTest, MisusedCollectivesAndTrapFailTheLaunch) {
  std::vector<int> out(64, 0);
  MCSERVE_LAUNCH(t::LaneNotInMaskKernel, 1, 32, 0, nullptr)(out.data());
  absl::Status s = cuda_emu::TakeLaunchStatus("LaneNotInMaskKernel");
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_NE(s.message().find("does not name its own lane 1"), std::string::npos) << s;

  MCSERVE_LAUNCH(t::TrapKernel, 2, 32, 0, nullptr)(out.data());
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorLaunchFailure);
  s = cuda_emu::TakeLaunchStatus("TrapKernel");
  EXPECT_NE(s.message().find("__trap() in block (1,0,0) thread (3,0,0)"), std::string::npos) << s;
}

TEST(CudaEmuTest, InvalidLaunchConfigurationsAreRejected) {
  struct Case {
    dim3 grid, block;
    size_t shared;
  };
  const Case cases[] = {
      {dim3(1), dim3(1025), 0},     {dim3(1), dim3(32, 32, 2), 0}, {dim3(1), dim3(0), 0},
      {dim3(0), dim3(32), 0},       {dim3(1, 0, 1), dim3(32), 0},  {dim3(1), dim3(1, 1, 65), 0},
      {dim3(1), dim3(32), 48 * 1024 + 1},
  };
  for (const Case& c : cases) {
    std::vector<int> out(2048, 0);
    MCSERVE_LAUNCH(t::MarkKernel, c.grid, c.block, c.shared, nullptr)(out.data());
    const absl::Status s = emu::PeekLastError();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // taken
    EXPECT_EQ(std::count(out.begin(), out.end(), 1), 0) << "a rejected launch ran";
  }
  // The limits themselves are accepted.
  std::vector<int> out(1024, 0);
  MCSERVE_LAUNCH(t::MarkKernel, 1, dim3(32, 32, 1), 48 * 1024, nullptr)(out.data());
  EXPECT_TRUE(cuda_emu::TakeLaunchStatus("MarkKernel").ok());
  EXPECT_EQ(std::count(out.begin(), out.end(), 1), 1024);
}

// Under -DMCSERVE_SANITIZE=ON an out-of-bounds access inside a kernel (running on a fiber stack)
// is reported by AddressSanitizer, the analogue of compute-sanitizer's memcheck.
TEST(CudaEmuDeathTest, AddressSanitizerCatchesASharedMemoryOverrun) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        MCSERVE_LAUNCH(t::SharedOverrunKernel, 1, 32, 32 * sizeof(float), nullptr)();
      },
      "heap-buffer-overflow");
#else
  GTEST_SKIP() << "needs an AddressSanitizer build (-DMCSERVE_SANITIZE=ON)";
#endif
}

TEST(CudaEmuTest, ScheduleParsingAndScoping) {
  Schedule s = Schedule::kForward;
  EXPECT_TRUE(emu::ParseSchedule("reverse", &s));
  EXPECT_EQ(s, Schedule::kReverse);
  EXPECT_TRUE(emu::ParseSchedule("forward", &s));
  EXPECT_EQ(s, Schedule::kForward);
  EXPECT_FALSE(emu::ParseSchedule("sideways", &s));
  EXPECT_FALSE(emu::ParseSchedule(nullptr, &s));
  const Schedule before = emu::GetSchedule();
  {
    ScopedSchedule scoped(before == Schedule::kForward ? Schedule::kReverse : Schedule::kForward);
    EXPECT_NE(emu::GetSchedule(), before);
  }
  EXPECT_EQ(emu::GetSchedule(), before);
}

TEST(CudaEmuTest, MathAndSixteenBitConversions) {
  EXPECT_EQ(rsqrtf(4.0f), 0.5f);
  EXPECT_EQ(__int_as_float(0x3f800000), 1.0f);
  EXPECT_EQ(__float_as_int(-2.0f), static_cast<int>(0xc0000000u));
  EXPECT_EQ(__fdividef(1.0f, 4.0f), 0.25f);
  EXPECT_NEAR(__expf(1.0f), std::exp(1.0f), 1e-6f);
  EXPECT_EQ(__saturatef(2.0f), 1.0f);
  EXPECT_EQ(__saturatef(NAN), 0.0f);
  EXPECT_EQ(__float2bfloat16(1.0f).bits, 0x3f80);
  EXPECT_EQ(__bfloat162float(__float2bfloat16(3.140625f)), 3.140625f);
  EXPECT_EQ(__float2half(1.0f).bits, 0x3c00);
  EXPECT_EQ(__float2half(-2.0f).bits, 0xc000);
  EXPECT_EQ(__float2half(65504.0f).bits, 0x7bff);
  EXPECT_EQ(__float2half(65520.0f).bits, 0x7c00);       // rounds up to inf
  EXPECT_EQ(__float2half(0.1f).bits, 0x2e66);
  EXPECT_EQ(__float2half(std::ldexp(1.0f, -24)).bits, 0x0001);  // smallest subnormal
  EXPECT_EQ(__float2half(std::ldexp(1.0f, -25)).bits, 0x0000);  // tie to even: zero
  EXPECT_EQ(__float2half(std::ldexp(3.0f, -26)).bits, 0x0001);  // 0.75 ulp rounds up
  EXPECT_TRUE(std::isnan(__half2float(__float2half(NAN))));
  // Every half value survives half -> float -> half.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0) continue;  // NaN payloads are not kept
    ASSERT_EQ(__float2half(__half2float(__half{static_cast<uint16_t>(h)})).bits, h) << h;
  }
  EXPECT_EQ(min(3, -2), -2);
  EXPECT_EQ(max(1.5f, -1.0f), 1.5f);
}

}  // namespace
}  // namespace mcserve::kernels
