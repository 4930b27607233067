// kernels/core: Tensor allocation, host copies, views and errors; BF16/F16 scalar conversions;
// ValidateBatchLayout.
#include "kernels/core/tensor.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/core/batch_layout.h"
#include "kernels/core/dtype.h"

namespace mcserve::kernels {
namespace {

float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

TEST(DTypeTest, Bf16ToF32KnownValues) {
  EXPECT_EQ(Bf16ToF32(0x3f80), 1.0f);
  EXPECT_EQ(Bf16ToF32(0xc000), -2.0f);
  EXPECT_EQ(Bf16ToF32(0x3e80), 0.25f);
  EXPECT_EQ(Bf16ToF32(0x0001), FromBits(0x00010000u));  // smallest subnormal, 2^-133
  EXPECT_GT(Bf16ToF32(0x0001), 0.0f);
  EXPECT_EQ(Bf16ToF32(0x7f80), std::numeric_limits<float>::infinity());
  EXPECT_EQ(Bf16ToF32(0xff80), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(Bf16ToF32(0x7fc0)));
  EXPECT_TRUE(std::signbit(Bf16ToF32(0x8000)));
}

TEST(DTypeTest, F32ToBf16RoundsToNearestEven) {
  EXPECT_EQ(F32ToBf16(1.0f), 0x3f80);
  EXPECT_EQ(F32ToBf16(-2.0f), 0xc000);
  EXPECT_EQ(F32ToBf16(FromBits(0x3f808000u)), 0x3f80);  // tie, even below
  EXPECT_EQ(F32ToBf16(FromBits(0x3f818000u)), 0x3f82);  // tie, even above
  EXPECT_EQ(F32ToBf16(FromBits(0x3f808001u)), 0x3f81);  // just above the tie
  EXPECT_EQ(F32ToBf16(FromBits(0x3f807fffu)), 0x3f80);  // just below the tie
  EXPECT_EQ(F32ToBf16(FromBits(0xbf818000u)), 0xbf82);  // negative tie
  EXPECT_EQ(F32ToBf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds up to inf
  EXPECT_EQ(F32ToBf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(F32ToBf16(-0.0f), 0x8000);
  EXPECT_EQ(F32ToBf16(FromBits(0x00018000u)), 0x0002);  // subnormal tie rounds to even
  // NaN stays NaN, including a signalling NaN whose payload lives in the dropped bits.
  EXPECT_TRUE(std::isnan(Bf16ToF32(F32ToBf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isnan(Bf16ToF32(F32ToBf16(FromBits(0x7f800001u)))));
  EXPECT_TRUE(std::isnan(Bf16ToF32(F32ToBf16(FromBits(0xff800001u)))));
  for (uint32_t b = 0; b < 0x7f80; b += 0x37) {  // finite bf16 values round-trip exactly
    EXPECT_EQ(F32ToBf16(Bf16ToF32(static_cast<uint16_t>(b))), b);
  }
}

TEST(DTypeTest, F16ToF32KnownValues) {
  EXPECT_EQ(F16ToF32(0x3c00), 1.0f);
  EXPECT_EQ(F16ToF32(0xc000), -2.0f);
  EXPECT_EQ(F16ToF32(0x3555), 0.333251953125f);
  EXPECT_EQ(F16ToF32(0x7bff), 65504.0f);
  EXPECT_EQ(F16ToF32(0x0400), std::ldexp(1.0f, -14));          // smallest normal
  EXPECT_EQ(F16ToF32(0x0001), std::ldexp(1.0f, -24));          // smallest subnormal
  EXPECT_EQ(F16ToF32(0x03ff), std::ldexp(1023.0f, -24));       // largest subnormal
  EXPECT_EQ(F16ToF32(0x8200), -std::ldexp(512.0f, -24));       // negative subnormal
  EXPECT_EQ(F16ToF32(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(F16ToF32(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(F16ToF32(0x7e00)));
  EXPECT_TRUE(std::isnan(F16ToF32(0x7c01)));
  EXPECT_EQ(F16ToF32(0x8000), 0.0f);
  EXPECT_TRUE(std::signbit(F16ToF32(0x8000)));
}

TEST(DTypeTest, SizesAndNames) {
  EXPECT_EQ(DTypeSize(DType::kF32), 4);
  EXPECT_EQ(DTypeSize(DType::kBF16), 2);
  EXPECT_EQ(DTypeSize(DType::kF16), 2);
  EXPECT_EQ(DTypeSize(DType::kI32), 4);
  EXPECT_EQ(DTypeName(DType::kBF16), "BF16");
  EXPECT_EQ(DeviceName(Device::kCuda), "cuda");
}

TEST(TensorTest, ZerosAndMetadata) {
  auto t = Tensor::Zeros(DType::kF32, {2, 3}, Device::kCpu);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->numel(), 6);
  EXPECT_EQ(t->nbytes(), 24);
  EXPECT_EQ(t->rank(), 2);
  EXPECT_EQ(t->dim(-1), 3);
  EXPECT_FALSE(t->read_only());
  EXPECT_EQ(t->DebugString(), "F32[2, 3] on cpu");
  EXPECT_EQ(*t->ToHostF32(), std::vector<float>(6, 0.0f));
  auto h = Tensor::Zeros(DType::kBF16, {5}, Device::kCpu);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->nbytes(), 10);
  EXPECT_EQ(*h->ToHostF32(), std::vector<float>(5, 0.0f));
  auto empty = Tensor::Zeros(DType::kF32, {0, 4}, Device::kCpu);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->defined());
  EXPECT_TRUE(empty->ToHostF32()->empty());
  EXPECT_EQ(Tensor::Zeros(DType::kF32, {2, -1}, Device::kCpu).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(Tensor::Zeros(DType::kF32, {2}, Device::kCuda).ok());
  EXPECT_FALSE(Tensor().defined());
}

TEST(TensorTest, HostRoundTrips) {
  std::vector<float> v = {1.5f, -2.0f, 3.25f, 0.0f, 1e-30f, -7.0f};
  auto t = Tensor::FromHost(v, {3, 2}, Device::kCpu);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t->ToHostF32(), v);
  EXPECT_EQ(Tensor::FromHost(v, {4, 2}, Device::kCpu).status().code(), absl::StatusCode::kInvalidArgument);
  std::vector<int32_t> ids = {3, -1, 7};
  auto i = Tensor::FromHostI32(ids, {3}, Device::kCpu);
  ASSERT_TRUE(i.ok());
  EXPECT_EQ(i->dtype(), DType::kI32);
  EXPECT_EQ(*i->ToHostI32(), ids);
  EXPECT_EQ(i->ToHostF32().status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(t->ToHostI32().status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Tensor::FromHostI32(ids, {2}, Device::kCpu).status().code(), absl::StatusCode::kInvalidArgument);

  std::vector<float> w = {9.0f, 8.0f, 7.0f, 6.0f, 5.0f, 4.0f};
  ASSERT_TRUE(t->CopyFromHost(w).ok());
  EXPECT_EQ(*t->ToHostF32(), w);
  EXPECT_EQ(t->CopyFromHost(std::vector<float>(5)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(i->CopyFromHost(std::vector<float>(3)).code(), absl::StatusCode::kInvalidArgument);
}

TEST(TensorTest, WrapHostWidensAndIsReadOnly) {
  auto bits = std::make_shared<std::vector<uint16_t>>(std::vector<uint16_t>{0x3f80, 0xc000, 0x3e80});
  Tensor b = Tensor::WrapHost(bits->data(), DType::kBF16, {3}, bits);
  EXPECT_TRUE(b.read_only());
  EXPECT_EQ(*b.ToHostF32(), (std::vector<float>{1.0f, -2.0f, 0.25f}));
  auto halves = std::make_shared<std::vector<uint16_t>>(std::vector<uint16_t>{0x3c00, 0x0001, 0x7bff});
  Tensor h = Tensor::WrapHost(halves->data(), DType::kF16, {3}, halves);
  EXPECT_EQ(*h.ToHostF32(), (std::vector<float>{1.0f, std::ldexp(1.0f, -24), 65504.0f}));

  auto floats = std::make_shared<std::vector<float>>(4, 1.0f);
  Tensor ro = Tensor::WrapHost(floats->data(), DType::kF32, {4}, floats);
  EXPECT_EQ(ro.CopyFromHost(std::vector<float>(4, 2.0f)).code(), absl::StatusCode::kInvalidArgument);
  auto src = *Tensor::Zeros(DType::kF32, {4}, Device::kCpu);
  EXPECT_EQ(ro.CopyFrom(src).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*floats, std::vector<float>(4, 1.0f));
}

TEST(TensorTest, CopyFrom) {
  auto src = *Tensor::FromHost(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}, Device::kCpu);
  auto dst = *Tensor::Zeros(DType::kF32, {3, 2}, Device::kCpu);  // same numel, other shape: allowed
  ASSERT_TRUE(dst.CopyFrom(src).ok());
  EXPECT_EQ(*dst.ToHostF32(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  auto wrong_numel = *Tensor::Zeros(DType::kF32, {5}, Device::kCpu);
  auto wrong_dtype = *Tensor::Zeros(DType::kBF16, {6}, Device::kCpu);
  EXPECT_EQ(wrong_numel.CopyFrom(src).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(wrong_dtype.CopyFrom(src).code(), absl::StatusCode::kInvalidArgument);
  // Overlapping views (shift by one row) behave like memmove.
  auto t = *Tensor::FromHost(std::vector<float>{1, 2, 3, 4, 5, 6}, {3, 2}, Device::kCpu);
  Tensor head = t.Rows(0, 2), tail = t.Rows(1, 3);
  ASSERT_TRUE(tail.CopyFrom(head).ok());
  EXPECT_EQ(*t.ToHostF32(), (std::vector<float>{1, 2, 1, 2, 3, 4}));
}

TEST(TensorTest, RowsAndReshapeAreViews) {
  auto t = *Tensor::FromHost(std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {4, 3}, Device::kCpu);
  Tensor mid = t.Rows(1, 3);
  EXPECT_EQ(mid.shape(), (Shape{2, 3}));
  EXPECT_EQ(*mid.ToHostF32(), (std::vector<float>{3, 4, 5, 6, 7, 8}));
  ASSERT_TRUE(mid.CopyFromHost(std::vector<float>(6, -1.0f)).ok());  // writes through to t
  EXPECT_EQ(*t.ToHostF32(), (std::vector<float>{0, 1, 2, -1, -1, -1, -1, -1, -1, 9, 10, 11}));
  EXPECT_EQ(t.Rows(4, 4).numel(), 0);

  auto t3 = *Tensor::FromHost(std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7}, {2, 2, 2}, Device::kCpu);
  EXPECT_EQ(*t3.Rows(1, 2).ToHostF32(), (std::vector<float>{4, 5, 6, 7}));

  auto r = t.Reshape({2, 6});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->shape(), (Shape{2, 6}));
  ASSERT_TRUE(r->Rows(1, 2).CopyFromHost(std::vector<float>(6, 5.0f)).ok());
  EXPECT_EQ(*t.ToHostF32(), (std::vector<float>{0, 1, 2, -1, -1, -1, 5, 5, 5, 5, 5, 5}));
  EXPECT_EQ(t.Reshape({5, 2}).status().code(), absl::StatusCode::kInvalidArgument);

  auto bf = *Tensor::Zeros(DType::kBF16, {4, 2}, Device::kCpu);
  EXPECT_EQ(bf.Rows(2, 4).nbytes(), 8);
}

TEST(TensorTest, ShapeHelpers) {
  EXPECT_EQ(NumElements({}), 1);
  EXPECT_EQ(NumElements({2, 0, 3}), 0);
  EXPECT_EQ(NumElements({2, 3, 4}), 24);
  EXPECT_EQ(ShapeString({2, 3, 4}), "[2, 3, 4]");
  EXPECT_EQ(ShapeString({}), "[]");
}

// A layout from host vectors (tensors kept alive by the struct).
struct Layout {
  Tensor cu, slots;
  BatchLayout view() const { return {&cu, &slots}; }
};
Layout MakeLayout(std::vector<int32_t> cu, std::vector<int32_t> slots) {
  return {*Tensor::FromHostI32(cu, {static_cast<int64_t>(cu.size())}, Device::kCpu),
          *Tensor::FromHostI32(slots, {static_cast<int64_t>(slots.size())}, Device::kCpu)};
}

TEST(BatchLayoutTest, AcceptsValidLayouts) {
  EXPECT_TRUE(ValidateBatchLayout(MakeLayout({0, 2, 5}, {1, 0}).view(), 5, 2).ok());
  EXPECT_TRUE(ValidateBatchLayout(MakeLayout({0, 1, 2, 3}, {4, 0, 2}).view(), 3, 5).ok());  // decode
  EXPECT_TRUE(ValidateBatchLayout(MakeLayout({0, 0, 3}, {0, 1}).view(), 3, 2).ok());       // empty sequence
  EXPECT_TRUE(ValidateBatchLayout(MakeLayout({0}, {}).view(), 0, 1).ok());                 // empty batch
}

TEST(BatchLayoutTest, RejectsBadLayouts) {
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(ValidateBatchLayout({}, 0, 1).code(), kInvalid);
  EXPECT_EQ(ValidateBatchLayout(MakeLayout({1, 2, 5}, {0, 1}).view(), 5, 2).code(), kInvalid);  // cu[0] != 0
  EXPECT_EQ(ValidateBatchLayout(MakeLayout({0, 2, 4}, {0, 1}).view(), 5, 2).code(), kInvalid);  // misses rows
  EXPECT_EQ(ValidateBatchLayout(MakeLayout({0, 2, 6}, {0, 1}).view(), 5, 2).code(), kInvalid);  // past rows
  EXPECT_EQ(ValidateBatchLayout(MakeLayout({0, 4, 2, 5}, {0, 1, 2}).view(), 5, 3).code(), kInvalid);  // decreasing
  EXPECT_EQ(ValidateBatchLayout(MakeLayout({0, 2, 5}, {0, 0}).view(), 5, 2).code(), kInvalid);   // duplicate slot
  EXPECT_EQ(ValidateBatchLayout(MakeLayout({0, 2, 5}, {0, 2}).view(), 5, 2).code(), kInvalid);   // slot >= slots
  EXPECT_EQ(ValidateBatchLayout(MakeLayout({0, 2, 5}, {-1, 0}).view(), 5, 2).code(), kInvalid);  // negative slot
  EXPECT_EQ(ValidateBatchLayout(MakeLayout({0, 2, 5}, {0}).view(), 5, 2).code(), kInvalid);      // size mismatch
  Layout good = MakeLayout({0, 2, 5}, {1, 0});
  auto cu_f32 = *Tensor::FromHost(std::vector<float>{0, 2, 5}, {3}, Device::kCpu);
  auto cu_2d = *Tensor::FromHostI32(std::vector<int32_t>{0, 2, 5}, {1, 3}, Device::kCpu);
  EXPECT_EQ(ValidateBatchLayout({&cu_f32, &good.slots}, 5, 2).code(), kInvalid);
  EXPECT_EQ(ValidateBatchLayout({&cu_2d, &good.slots}, 5, 2).code(), kInvalid);
  EXPECT_EQ(ValidateBatchLayout({&good.cu, nullptr}, 5, 2).code(), kInvalid);
}

}  // namespace
}  // namespace mcserve::kernels
