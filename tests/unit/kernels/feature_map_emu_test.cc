// FeatureMap on the CUDA emulator against the CPU backend for every kind: F32/BF16/F16 weights and
// biases, row counts and widths that are not multiples of the block sizes (Hedgehog with d over one
// block), in-place maps, both emulator schedules bit-identical, and validation on cuda-emu.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/core/tensor_data.h"
#include "kernels/core/device_runtime.h"
#include "kernels/cuda/emu/emu.h"
#include "kernels/feature_map/feature_map.h"
#include "random_inputs.h"
#include "tests/unit/kernels/emu_test_device.h"

namespace mcserve::kernels {
namespace {

// A tensor of `dtype` on `dev` holding `v`: F32 as is, BF16 rounded, F16 as random normal halves of
// magnitude < 1 (the CPU and the emulator widen the same bits).
Tensor Param(const std::vector<float>& v, Shape shape, DType dtype, Device dev, uint32_t seed) {
  if (dtype == DType::kF32) return *Tensor::FromHost(v, std::move(shape), dev);
  std::vector<uint16_t> bits(v.size());
  std::mt19937 rng(seed);
  for (size_t i = 0; i < v.size(); ++i) {
    bits[i] = dtype == DType::kBF16
                  ? F32ToBf16(v[i])
                  : static_cast<uint16_t>(((rng() & 1u) << 15) | ((9u + rng() % 6u) << 10) | (rng() & 0x3ffu));
  }
  Tensor t = *Tensor::Zeros(dtype, std::move(shape), dev);
  if (dev == Device::kCpu) {
    std::memcpy(RawData(t), bits.data(), bits.size() * 2);
  } else {
    EXPECT_TRUE((*RuntimeFor(dev))->CopyHostToDevice(RawData(t), bits.data(), bits.size() * 2).ok());
  }
  return t;
}

struct MapCase {
  FeatureMapKind kind = FeatureMapKind::kIdentity;
  int64_t t = 5, heads = 3, d = 20;
  DType w_dtype = DType::kF32, b_dtype = DType::kF32;
  bool bias = true, in_place = false;
};

bool UsesW1(FeatureMapKind k) {
  return k == FeatureMapKind::kHadamard || k == FeatureMapKind::kHedgehog || k == FeatureMapKind::kT2R;
}

struct MapResult {
  absl::Status status;
  std::vector<float> out;
};

MapResult RunMap(const MapCase& c, Device dev) {
  const int64_t d = c.d, out_dim = FeatureMapOutDim(c.kind, d);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  Tensor x = *Tensor::FromHost(RandomVector(c.t * c.heads * d, 1, -2.0f, 2.0f), {c.t, c.heads, d}, dev);
  Tensor w1 = Param(RandomVector(d * d, 2, -scale, scale), {d, d}, c.w_dtype, dev, 12);
  Tensor w2 = Param(RandomVector(d * d, 3, -scale, scale), {d, d}, c.w_dtype, dev, 13);
  Tensor b1 = Param(RandomVector(d, 4), {d}, c.b_dtype, dev, 14);
  Tensor b2 = Param(RandomVector(d, 5), {d}, c.b_dtype, dev, 15);
  Tensor out = *Tensor::Zeros(DType::kF32, {c.t, c.heads, out_dim}, dev);
  const bool layer1 = UsesW1(c.kind), layer2 = c.kind == FeatureMapKind::kHadamard;
  FeatureMapArgs a{.kind = c.kind,
                   .x = &x,
                   .w1 = layer1 ? &w1 : nullptr,
                   .b1 = layer1 && c.bias ? &b1 : nullptr,
                   .w2 = layer2 ? &w2 : nullptr,
                   .b2 = layer2 && c.bias ? &b2 : nullptr,
                   .out = c.in_place ? &x : &out};
  MapResult r;
  r.status = FeatureMap(Context{.device = dev}, a);
  if (r.status.ok()) r.out = *a.out->ToHostF32();
  return r;
}

// CPU (never in place) vs the emulator under both schedules, which must agree bit for bit.
void CheckCase(MapCase c, float tol) {
  SCOPED_TRACE(static_cast<int>(c.kind));
  MapCase cpu_case = c;
  cpu_case.in_place = false;
  const MapResult cpu = RunMap(cpu_case, Device::kCpu);
  ASSERT_TRUE(cpu.status.ok()) << cpu.status;
  const std::array<MapResult, 2> emu = RunSchedules([&] { return RunMap(c, DeviceUnderTest()); });
  for (const MapResult& r : emu) ASSERT_TRUE(r.status.ok()) << r.status;
  ASSERT_EQ(emu[0].out.size(), cpu.out.size());
  int bad = 0;
  for (size_t i = 0; i < cpu.out.size() && bad < 5; ++i) {
    if (!(std::fabs(emu[0].out[i] - cpu.out[i]) <= tol * (1.0f + std::fabs(cpu.out[i])))) {
      ADD_FAILURE() << "out[" << i << "]: " << emu[0].out[i] << " vs " << cpu.out[i];
      ++bad;
    }
  }
  EXPECT_EQ(std::memcmp(emu[0].out.data(), emu[1].out.data(), emu[0].out.size() * sizeof(float)), 0);
}

// Element-wise maps are the same float operations as the CPU's.
constexpr float kElementwiseTol = 1e-6f;
// Affine maps: the GEMM's summation order differs from the CPU loop (and the bias is added last).
constexpr float kAffineTol = 2e-5f;

TEST(FeatureMapEmuTest, ElementwiseKinds) {
  for (FeatureMapKind k : {FeatureMapKind::kIdentity, FeatureMapKind::kElu, FeatureMapKind::kRelu,
                           FeatureMapKind::kDpfp, FeatureMapKind::kDpfp3}) {
    MapCase c;
    c.kind = k;
    CheckCase(c, kElementwiseTol);
    c.t = 7;
    c.d = 13;
    CheckCase(c, kElementwiseTol);
  }
}

TEST(FeatureMapEmuTest, AffineKindsF32) {
  for (FeatureMapKind k : {FeatureMapKind::kHadamard, FeatureMapKind::kHedgehog, FeatureMapKind::kT2R}) {
    MapCase c;
    c.kind = k;
    CheckCase(c, kAffineTol);
    c.bias = false;
    c.d = 13;
    CheckCase(c, kAffineTol);
  }
}

TEST(FeatureMapEmuTest, AffineKindsHalfWeights) {
  for (FeatureMapKind k : {FeatureMapKind::kHadamard, FeatureMapKind::kHedgehog, FeatureMapKind::kT2R}) {
    MapCase c;
    c.kind = k;
    c.w_dtype = DType::kBF16;
    c.b_dtype = DType::kF16;
    CheckCase(c, kAffineTol);
    c.w_dtype = DType::kF16;
    c.b_dtype = DType::kBF16;
    CheckCase(c, kAffineTol);
  }
}

TEST(FeatureMapEmuTest, HedgehogWiderThanOneBlock) {
  MapCase c;
  c.kind = FeatureMapKind::kHedgehog;
  c.t = 2;
  c.heads = 2;
  c.d = 150;
  CheckCase(c, kAffineTol);
}

TEST(FeatureMapEmuTest, InPlaceSameShapeKinds) {
  for (FeatureMapKind k : {FeatureMapKind::kIdentity, FeatureMapKind::kElu, FeatureMapKind::kRelu,
                           FeatureMapKind::kHadamard, FeatureMapKind::kT2R}) {
    MapCase c;
    c.kind = k;
    c.in_place = true;
    CheckCase(c, UsesW1(k) ? kAffineTol : kElementwiseTol);
  }
}

TEST(FeatureMapEmuTest, InvalidInputFailsOnCudaEmu) {
  const Device dev = DeviceUnderTest();
  const Context ctx{.device = dev};
  Tensor x = *Tensor::Zeros(DType::kF32, {2, 2, 8}, dev);
  Tensor w = *Tensor::Zeros(DType::kF32, {8, 8}, dev);
  Tensor out = *Tensor::Zeros(DType::kF32, {2, 2, 8}, dev);
  Tensor wide = *Tensor::Zeros(DType::kF32, {2, 2, 16}, dev);
  Tensor cpu_out = *Tensor::Zeros(DType::kF32, {2, 2, 8}, Device::kCpu);
  EXPECT_TRUE(FeatureMap(ctx, {.kind = FeatureMapKind::kT2R, .x = &x, .w1 = &w, .out = &out}).ok());
  EXPECT_EQ(FeatureMap(ctx, {.kind = FeatureMapKind::kT2R, .x = &x, .out = &out}).code(),
            absl::StatusCode::kInvalidArgument);  // w1 missing
  EXPECT_EQ(FeatureMap(ctx, {.kind = FeatureMapKind::kT2R, .x = &x, .w1 = &w, .w2 = &w, .out = &out}).code(),
            absl::StatusCode::kInvalidArgument);  // w2 not used
  EXPECT_EQ(FeatureMap(ctx, {.kind = FeatureMapKind::kElu, .x = &x, .out = &wide}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(FeatureMap(ctx, {.kind = FeatureMapKind::kHedgehog, .x = &x, .w1 = &w, .out = &wide}).ok());
  EXPECT_EQ(FeatureMap(ctx, {.kind = FeatureMapKind::kElu, .x = &x, .out = &cpu_out}).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mcserve::kernels
