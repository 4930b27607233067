// The emulated device runtime: caching allocator (reuse, accounting, bad frees), copies and their
// range checks, Zero, Gemm against a double loop (F32/BF16/F16 B, batched, strided, broadcast B,
// accumulate, odd sizes), RuntimeFor, and under ASan that an out-of-bounds device access is caught.
#include "kernels/cuda/emu/emu_device_runtime.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/core/dtype.h"
#include "kernels/core/device_runtime.h"
#include "kernels/cuda/size_class.h"

namespace mcserve::kernels::emu {
namespace {

TEST(SizeClassTest, RoundsUpWithBoundedSlack) {
  EXPECT_EQ(internal::SizeClassBytes(0), 256u);
  EXPECT_EQ(internal::SizeClassBytes(256), 256u);
  EXPECT_EQ(internal::SizeClassBytes(257), 320u);
  EXPECT_EQ(internal::SizeClassBytes(512), 512u);
  EXPECT_EQ(internal::SizeClassBytes(513), 640u);
  for (size_t b : {1000ul, 4097ul, 123457ul, 9999999ul}) {
    const size_t c = internal::SizeClassBytes(b);
    EXPECT_GE(c, b);
    EXPECT_LE(c, b + b / 4 + 64) << b;
    EXPECT_EQ(c % 64, 0u) << b;
  }
}

TEST(EmuDeviceRuntimeTest, AllocateFreeReusesBlocksAndAccounts) {
  EmuDeviceRuntime rt;
  auto p = rt.Allocate(1000);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*p) % 64, 0u);
  EXPECT_EQ(rt.bytes_in_use(), 1024u);
  EXPECT_EQ(rt.bytes_reserved(), 1024u);
  EXPECT_TRUE(rt.IsDeviceRange(*p, 1000));
  EXPECT_FALSE(rt.IsDeviceRange(*p, 1001));  // the slack past the request is not usable
  EXPECT_TRUE(rt.InArena(*p));

  rt.Free(*p);
  EXPECT_EQ(rt.bytes_in_use(), 0u);
  EXPECT_EQ(rt.bytes_reserved(), 1024u);  // kept by the cache
  EXPECT_FALSE(rt.IsDeviceRange(*p, 1));

  auto q = rt.Allocate(900);  // same class: the cached block comes back
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(*q, *p);
  EXPECT_EQ(rt.bytes_reserved(), 1024u);
  auto r = rt.Allocate(1000);  // the class's list is empty: a new block
  ASSERT_TRUE(r.ok());
  EXPECT_NE(*r, *q);
  EXPECT_EQ(rt.bytes_in_use(), 2048u);
  EXPECT_EQ(rt.bytes_reserved(), 2048u);
  auto s = rt.Allocate(5000);  // another class
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(rt.bytes_in_use(), 2048u + internal::SizeClassBytes(5000));
  rt.Free(*q);
  rt.Free(*r);
  rt.Free(*s);
  rt.Free(nullptr);  // no-op
  EXPECT_EQ(rt.bytes_in_use(), 0u);
  EXPECT_EQ(rt.bytes_reserved(), 2048u + internal::SizeClassBytes(5000));

  // A steady loop of allocate/free reserves nothing after its first step.
  size_t reserved = 0;
  for (int step = 0; step < 100; ++step) {
    auto a = rt.Allocate(1000), b = rt.Allocate(700), c = rt.Allocate(4000);
    ASSERT_TRUE(a.ok() && b.ok() && c.ok());
    rt.Free(*a);
    rt.Free(*b);
    rt.Free(*c);
    if (step == 0) reserved = rt.bytes_reserved();
    ASSERT_EQ(rt.bytes_reserved(), reserved) << step;
  }
  EXPECT_EQ(reserved, 2048u + internal::SizeClassBytes(5000) + internal::SizeClassBytes(700) +
                          internal::SizeClassBytes(4000));
}

TEST(EmuDeviceRuntimeTest, LargeBlocksAndManyChunks) {
  EmuDeviceRuntime rt;
  std::vector<void*> blocks;
  for (int i = 0; i < 10; ++i) {  // 10 x 8 MiB spans more than one 64 MiB chunk
    auto p = rt.Allocate(size_t{8} << 20);
    ASSERT_TRUE(p.ok()) << p.status();
    blocks.push_back(*p);
  }
  auto big = rt.Allocate((size_t{40} << 20) + 3);  // a mapping of its own
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_TRUE(rt.IsDeviceRange(*big, (size_t{40} << 20) + 3));
  // Touch the ends of every block through the runtime.
  const float one = 1.0f;
  for (void* p : blocks) {
    ASSERT_TRUE(rt.CopyHostToDevice(static_cast<char*>(p) + (size_t{8} << 20) - 4, &one, 4).ok());
  }
  for (size_t i = 0; i < blocks.size(); ++i) {
    for (size_t j = i + 1; j < blocks.size(); ++j) ASSERT_NE(blocks[i], blocks[j]);
  }
  EXPECT_EQ(rt.bytes_in_use(), 10 * (size_t{8} << 20) + internal::SizeClassBytes((size_t{40} << 20) + 3));
  for (void* p : blocks) rt.Free(p);
  rt.Free(*big);
  auto again = rt.Allocate(size_t{44} << 20);  // same class as the request above
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *big);
  rt.Free(*again);
}

TEST(EmuDeviceRuntimeDeathTest, FreeOfUnknownPointerAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EmuDeviceRuntime rt;
  auto p = rt.Allocate(512);
  ASSERT_TRUE(p.ok());
  int host = 0;
  EXPECT_DEATH(rt.Free(&host), "not a live device allocation");
  EXPECT_DEATH(rt.Free(static_cast<char*>(*p) + 64), "not a live device allocation");
  rt.Free(*p);
  EXPECT_DEATH(rt.Free(*p), "not a live device allocation");  // double free
}

TEST(EmuDeviceRuntimeTest, CopiesRoundTripAndZero) {
  EmuDeviceRuntime rt;
  const size_t n = 1237;
  std::vector<float> host(n);
  for (size_t i = 0; i < n; ++i) host[i] = static_cast<float>(i) * 0.5f - 7.0f;
  auto d1 = rt.Allocate(n * sizeof(float)), d2 = rt.Allocate(n * sizeof(float));
  ASSERT_TRUE(d1.ok() && d2.ok());
  ASSERT_TRUE(rt.CopyHostToDevice(*d1, host.data(), n * sizeof(float)).ok());
  ASSERT_TRUE(rt.CopyDeviceToDevice(*d2, *d1, n * sizeof(float)).ok());
  ASSERT_TRUE(rt.Zero(*d1, n * sizeof(float)).ok());
  std::vector<float> back(n, -1.0f);
  ASSERT_TRUE(rt.Synchronize().ok());
  ASSERT_TRUE(rt.CopyDeviceToHost(back.data(), *d2, n * sizeof(float)).ok());
  EXPECT_EQ(back, host);
  ASSERT_TRUE(rt.CopyDeviceToHost(back.data(), *d1, n * sizeof(float)).ok());
  EXPECT_EQ(back, std::vector<float>(n, 0.0f));

  // Partial copies at offsets, and a zeroed sub-range.
  float* f2 = static_cast<float*>(*d2);
  ASSERT_TRUE(rt.Zero(f2 + 10, 5 * sizeof(float)).ok());
  std::vector<float> part(20);
  ASSERT_TRUE(rt.CopyDeviceToHost(part.data(), f2 + 5, 20 * sizeof(float)).ok());
  for (int i = 0; i < 20; ++i) {
    const float want = (i >= 5 && i < 10) ? 0.0f : host[5 + i];
    EXPECT_EQ(part[i], want) << i;
  }
  rt.Free(*d1);
  rt.Free(*d2);
}

TEST(EmuDeviceRuntimeTest, CopiesRejectHostDeviceMixUpsAndOutOfRange) {
  EmuDeviceRuntime rt;
  auto d = rt.Allocate(100), e = rt.Allocate(100);
  ASSERT_TRUE(d.ok() && e.ok());
  std::vector<char> host(200);
  auto is_invalid = [](const absl::Status& s) { return s.code() == absl::StatusCode::kInvalidArgument; };
  EXPECT_TRUE(is_invalid(rt.CopyHostToDevice(*d, host.data(), 101)));           // past the request
  EXPECT_TRUE(is_invalid(rt.CopyHostToDevice(host.data(), host.data(), 10)));   // dst is host
  EXPECT_TRUE(is_invalid(rt.CopyHostToDevice(*d, *e, 10)));                     // src is device
  EXPECT_TRUE(is_invalid(rt.CopyDeviceToHost(*e, *d, 10)));                     // dst is device
  EXPECT_TRUE(is_invalid(rt.CopyDeviceToHost(host.data(), static_cast<char*>(*d) + 90, 11)));
  EXPECT_TRUE(is_invalid(rt.CopyDeviceToDevice(*d, static_cast<char*>(*d) + 10, 50)));  // overlap
  EXPECT_TRUE(is_invalid(rt.Zero(host.data(), 10)));
  const absl::Status s = rt.CopyHostToDevice(*d, host.data(), 101);
  EXPECT_NE(s.message().find("CopyHostToDevice"), std::string::npos) << s;
  rt.Free(*d);
  EXPECT_TRUE(is_invalid(rt.Zero(*d, 10)));  // freed
  EXPECT_TRUE(rt.CopyHostToDevice(*e, host.data(), 100).ok());
  EXPECT_TRUE(rt.CopyHostToDevice(*e, host.data(), 0).ok());
  rt.Free(*e);
}

// ---- Gemm -----------------------------------------------------------------------------------

// Random B of `dtype` as raw elements, and the exact float each element represents.
struct HostB {
  std::vector<uint8_t> raw;
  std::vector<float> value;
};

HostB MakeB(DType dtype, size_t count, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  HostB b;
  b.value.resize(count);
  b.raw.resize(count * DTypeSize(dtype));
  for (size_t i = 0; i < count; ++i) {
    if (dtype == DType::kF32) {
      b.value[i] = u(rng);
      std::memcpy(&b.raw[i * 4], &b.value[i], 4);
      continue;
    }
    uint16_t bits;
    if (dtype == DType::kBF16) {
      bits = F32ToBf16(u(rng));
      b.value[i] = Bf16ToF32(bits);
    } else {  // F16: sign, exponent 2^-6..2^1, random mantissa
      bits = static_cast<uint16_t>(((rng() & 1u) << 15) | ((9u + rng() % 8u) << 10) | (rng() & 0x3ffu));
      b.value[i] = F16ToF32(bits);
    }
    std::memcpy(&b.raw[i * 2], &bits, 2);
  }
  return b;
}

struct GemmCase {
  DType dtype;
  int64_t m, n, k, batch;
  int64_t pad_a, pad_b, pad_c;  // extra elements between batch entries
  bool broadcast_b;             // stride_b = 0
  bool accumulate;
};

void RunGemmCase(const GemmCase& t) {
  SCOPED_TRACE(::testing::Message() << DTypeName(t.dtype) << " m=" << t.m << " n=" << t.n << " k=" << t.k
                                    << " batch=" << t.batch << " bcast=" << t.broadcast_b
                                    << " acc=" << t.accumulate);
  EmuDeviceRuntime rt;
  std::mt19937 rng(static_cast<uint32_t>(t.m * 131 + t.n * 7 + t.k + t.batch));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const int64_t sa = t.m * t.k + t.pad_a, sc = t.m * t.n + t.pad_c;
  const int64_t sb = t.broadcast_b ? 0 : t.n * t.k + t.pad_b;
  const int64_t len_a = (t.batch - 1) * sa + t.m * t.k, len_c = (t.batch - 1) * sc + t.m * t.n;
  const int64_t len_b = (t.batch - 1) * sb + t.n * t.k;
  std::vector<float> a(len_a), c0(len_c);
  for (float& x : a) x = u(rng);
  for (float& x : c0) x = u(rng);
  HostB b = MakeB(t.dtype, len_b, rng);

  auto da = rt.Allocate(len_a * 4), db = rt.Allocate(b.raw.size()), dc = rt.Allocate(len_c * 4);
  ASSERT_TRUE(da.ok() && db.ok() && dc.ok());
  ASSERT_TRUE(rt.CopyHostToDevice(*da, a.data(), len_a * 4).ok());
  ASSERT_TRUE(rt.CopyHostToDevice(*db, b.raw.data(), b.raw.size()).ok());
  ASSERT_TRUE(rt.CopyHostToDevice(*dc, c0.data(), len_c * 4).ok());
  DeviceGemmArgs g;
  g.m = t.m, g.n = t.n, g.k = t.k, g.batch = t.batch;
  g.a = static_cast<const float*>(*da), g.b = *db, g.b_dtype = t.dtype, g.c = static_cast<float*>(*dc);
  g.stride_a = sa, g.stride_b = sb, g.stride_c = sc, g.accumulate = t.accumulate;
  ASSERT_TRUE(rt.Gemm(g).ok());
  std::vector<float> c(len_c);
  ASSERT_TRUE(rt.CopyDeviceToHost(c.data(), *dc, len_c * 4).ok());

  std::vector<bool> written(len_c, false);
  for (int64_t e = 0; e < t.batch; ++e) {
    for (int64_t i = 0; i < t.m; ++i) {
      for (int64_t j = 0; j < t.n; ++j) {
        double sum = 0, mag = 0;
        for (int64_t l = 0; l < t.k; ++l) {
          const double p = double(a[e * sa + i * t.k + l]) * b.value[e * sb + j * t.k + l];
          sum += p;
          mag += std::fabs(p);
        }
        const int64_t at = e * sc + i * t.n + j;
        if (t.accumulate) sum += c0[at], mag += std::fabs(c0[at]);
        written[at] = true;
        ASSERT_NEAR(c[at], sum, 1e-5 * mag + 1e-6) << "entry " << e << " (" << i << ", " << j << ")";
      }
    }
  }
  for (int64_t i = 0; i < len_c; ++i) {  // padding between C entries is untouched
    if (!written[i]) {
      ASSERT_EQ(c[i], c0[i]) << i;
    }
  }
  rt.Free(*da);
  rt.Free(*db);
  rt.Free(*dc);
}

TEST(EmuDeviceRuntimeTest, GemmMatchesDoubleLoop) {
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    RunGemmCase({dtype, 5, 37, 19, 1, 0, 0, 0, false, false});
    RunGemmCase({dtype, 1, 13, 7, 1, 0, 0, 0, false, true});
    RunGemmCase({dtype, 3, 11, 17, 4, 0, 0, 0, false, false});   // batched, packed
    RunGemmCase({dtype, 3, 11, 17, 3, 5, 9, 7, false, true});    // batched, padded strides
    RunGemmCase({dtype, 2, 9, 33, 3, 1, 0, 3, true, false});     // one B for every entry
    RunGemmCase({dtype, 3, 1100, 1000, 1, 0, 0, 0, false, true});  // 16-bit B widened in blocks
  }
}

TEST(EmuDeviceRuntimeTest, GemmEmptyProductAndValidation) {
  EmuDeviceRuntime rt;
  auto dc = rt.Allocate(6 * 4);
  ASSERT_TRUE(dc.ok());
  const std::vector<float> ones(6, 1.0f);
  ASSERT_TRUE(rt.CopyHostToDevice(*dc, ones.data(), 24).ok());
  DeviceGemmArgs g;
  g.m = 2, g.n = 3, g.k = 0, g.c = static_cast<float*>(*dc), g.accumulate = true;
  ASSERT_TRUE(rt.Gemm(g).ok());
  std::vector<float> c(6);
  ASSERT_TRUE(rt.CopyDeviceToHost(c.data(), *dc, 24).ok());
  EXPECT_EQ(c, ones);  // k = 0, accumulate: unchanged
  g.accumulate = false;
  ASSERT_TRUE(rt.Gemm(g).ok());
  ASSERT_TRUE(rt.CopyDeviceToHost(c.data(), *dc, 24).ok());
  EXPECT_EQ(c, std::vector<float>(6, 0.0f));  // k = 0: C = 0

  std::vector<float> host_a(2 * 4), host_b(3 * 4);
  DeviceGemmArgs bad;
  bad.m = 2, bad.n = 3, bad.k = 4, bad.a = host_a.data(), bad.b = host_b.data(), bad.c = static_cast<float*>(*dc);
  EXPECT_EQ(rt.Gemm(bad).code(), absl::StatusCode::kInvalidArgument);  // host operands
  bad.k = -1;
  EXPECT_EQ(rt.Gemm(bad).code(), absl::StatusCode::kInvalidArgument);
  DeviceGemmArgs too_big;
  too_big.m = 2, too_big.n = 4, too_big.k = 0, too_big.c = static_cast<float*>(*dc);  // C needs 8 floats
  EXPECT_EQ(rt.Gemm(too_big).code(), absl::StatusCode::kInvalidArgument);
  rt.Free(*dc);
}

// ---- RuntimeFor ------------------------------------------------------------------------------

TEST(RuntimeForTest, DevicesMapToTheirRuntimes) {
  auto emu = RuntimeFor(Device::kCudaEmu);
  ASSERT_TRUE(emu.ok()) << emu.status();
  EXPECT_EQ(*emu, &EmuRuntime());
  auto again = RuntimeFor(Device::kCudaEmu);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *emu);

  auto cpu = RuntimeFor(Device::kCpu);
  EXPECT_EQ(cpu.status().code(), absl::StatusCode::kInvalidArgument) << cpu.status();

  auto cuda = RuntimeFor(Device::kCuda);
  if (cuda.ok()) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_NE(cuda.status().message().find("CUDA"), std::string::npos) << cuda.status();
#if !defined(MCSERVE_WITH_CUDA)
  EXPECT_EQ(cuda.status().code(), absl::StatusCode::kUnimplemented);
#endif
}

// ---- AddressSanitizer catches what compute-sanitizer memcheck would ------------------------

#if defined(__SANITIZE_ADDRESS__)
TEST(EmuDeviceRuntimeDeathTest, OutOfBoundsDeviceAccessIsCaughtByAsan) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EmuDeviceRuntime rt;
  auto p = rt.Allocate(100);
  ASSERT_TRUE(p.ok());
  volatile char* d = static_cast<char*>(*p);
  d[99] = 1;  // the last requested byte is fine
  EXPECT_DEATH(d[100] = 1, "AddressSanitizer");  // one past the request, inside the size class
  EXPECT_DEATH(d[300] = 1, "AddressSanitizer");  // past the block
  rt.Free(*p);
  EXPECT_DEATH(d[0] = 1, "AddressSanitizer");  // use after free (the block sits in the cache)
}
#endif

}  // namespace
}  // namespace mcserve::kernels::emu
