// HostArena: copies keep dtype, shape and bits, are read-only and 64-byte aligned, packed into 2 MiB-
// aligned slabs (a tensor over a slab gets its own), and outlive the arena that made them.
#include "kernels/core/host_arena.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/core/tensor_data.h"  // test-only: checks where the copies live

namespace mcserve::kernels {
namespace {

constexpr uintptr_t kTwoMiB = uintptr_t{2} << 20;

uintptr_t Address(const Tensor& t) { return reinterpret_cast<uintptr_t>(Data<uint8_t>(t)); }

TEST(HostArenaTest, CopiesKeepDtypeShapeAndBitsAndAreReadOnlyAndAligned) {
  HostArena arena;
  const std::vector<uint16_t> bits = {0x3f80, 0x4000, 0xbf80, 0x0000, 0x7fc0, 0x0001};
  const Tensor bf16 = Tensor::WrapHost(bits.data(), DType::kBF16, {2, 3}, nullptr);
  auto f32 = Tensor::FromHost(std::vector<float>{1.5f, -2.0f, 3.25f}, {3}, Device::kCpu);
  ASSERT_TRUE(f32.ok());
  auto a = arena.Copy(bf16);
  auto b = arena.Copy(*f32);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->dtype(), DType::kBF16);
  EXPECT_EQ(a->shape(), (Shape{2, 3}));
  EXPECT_EQ(std::memcmp(Data<uint16_t>(*a), bits.data(), bits.size() * sizeof(uint16_t)), 0);
  EXPECT_EQ(*b->ToHostF32(), (std::vector<float>{1.5f, -2.0f, 3.25f}));
  EXPECT_TRUE(a->read_only() && b->read_only());
  EXPECT_EQ(Address(*a) % kTwoMiB, 0u);  // the first tensor of a slab starts it
  EXPECT_EQ(Address(*b) % 64, 0u);
  EXPECT_EQ(Address(*b), Address(*a) + 64);  // packed after it, 64-byte aligned
  EXPECT_NE(Data<uint16_t>(*a), bits.data());  // a copy, not a view
}

TEST(HostArenaTest, FromHostMakesAnF32TensorAndRefusesAWrongCount) {
  HostArena arena;
  auto t = arena.FromHost(std::vector<float>{1.f, 2.f, 3.f, 4.f}, {2, 2});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->dtype(), DType::kF32);
  EXPECT_EQ(*t->ToHostF32(), (std::vector<float>{1.f, 2.f, 3.f, 4.f}));
  EXPECT_EQ(arena.FromHost(std::vector<float>{1.f, 2.f}, {3}).status().code(), absl::StatusCode::kInvalidArgument);
}

// A tensor larger than what is left of a slab starts a new one (2 MiB aligned); one larger than a slab
// gets a slab of its own size.
TEST(HostArenaTest, NewSlabsWhenTheCurrentOneIsFull) {
  HostArena arena;
  const int64_t most = (HostArena::kSlabBytes - 4096) / sizeof(float), over = HostArena::kSlabBytes / sizeof(float) + 7;
  auto first = arena.FromHost(std::vector<float>(most, 1.0f), {most});
  auto second = arena.FromHost(std::vector<float>(2048, 2.0f), {2048});  // does not fit after `first`
  auto huge = arena.FromHost(std::vector<float>(over, 3.0f), {over});
  ASSERT_TRUE(first.ok() && second.ok() && huge.ok());
  EXPECT_EQ(Address(*second) % kTwoMiB, 0u);
  EXPECT_EQ(Address(*huge) % kTwoMiB, 0u);
  EXPECT_EQ(Data<float>(*huge)[over - 1], 3.0f);
  EXPECT_EQ(Data<float>(*second)[2047], 2.0f);
}

TEST(HostArenaTest, CopiesOutliveTheArena) {
  Tensor kept;
  {
    HostArena arena;
    auto t = arena.FromHost(std::vector<float>{4.f, 5.f}, {2});
    ASSERT_TRUE(t.ok());
    kept = *t;
  }
  EXPECT_EQ(*kept.ToHostF32(), (std::vector<float>{4.f, 5.f}));
}

TEST(HostArenaTest, RefusesADeviceTensor) {
  HostArena arena;
  auto t = Tensor::Zeros(DType::kF32, {4}, Device::kCudaEmu);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(arena.Copy(*t).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mcserve::kernels
