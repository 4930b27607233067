// Tensors on the emulated CUDA device: storage comes from the device runtime, and data crosses to
// and from the host only through explicit copies.
#include "gtest/gtest.h"
#include "kernels/core/tensor.h"
#include "kernels/core/device_runtime.h"

namespace mcserve::kernels {
namespace {

TEST(TensorDeviceTest, EmulatedDeviceRoundTrips) {
  auto runtime = RuntimeFor(Device::kCudaEmu);
  ASSERT_TRUE(runtime.ok()) << runtime.status();
  const size_t in_use = (*runtime)->bytes_in_use();
  {
    const std::vector<float> values = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f, -0.5f};
    auto t = Tensor::FromHost(values, {2, 3}, Device::kCudaEmu);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(t->device(), Device::kCudaEmu);
    EXPECT_GT((*runtime)->bytes_in_use(), in_use);
    EXPECT_EQ(*t->ToHostF32(), values);
    EXPECT_EQ(*t->Rows(1, 2).ToHostF32(), (std::vector<float>{0.0f, 7.0f, -0.5f}));

    auto copy = Tensor::Zeros(DType::kF32, {2, 3}, Device::kCudaEmu);
    ASSERT_TRUE(copy.ok());
    EXPECT_EQ(*copy->ToHostF32(), std::vector<float>(6, 0.0f));  // zeroed storage
    ASSERT_TRUE(copy->CopyFrom(*t).ok());
    EXPECT_EQ(*copy->ToHostF32(), values);
    ASSERT_TRUE(copy->CopyFromHost(std::vector<float>(6, 9.0f)).ok());
    EXPECT_EQ(*copy->ToHostF32(), std::vector<float>(6, 9.0f));
    EXPECT_EQ(*t->ToHostF32(), values);  // independent storage

    const std::vector<int32_t> ids = {4, -1, 7};
    auto i = Tensor::FromHostI32(ids, {3}, Device::kCudaEmu);
    ASSERT_TRUE(i.ok());
    EXPECT_EQ(*i->ToHostI32(), ids);
  }
  EXPECT_EQ((*runtime)->bytes_in_use(), in_use);  // storage went back to the cache
}

TEST(TensorDeviceTest, CopyBetweenHostAndDevice) {
  auto cpu = Tensor::FromHost(std::vector<float>{1, 2, 3}, {3}, Device::kCpu);
  auto emu = Tensor::Zeros(DType::kF32, {3}, Device::kCudaEmu);
  auto back = Tensor::Zeros(DType::kF32, {3}, Device::kCpu);
  ASSERT_TRUE(cpu.ok() && emu.ok() && back.ok());
  ASSERT_TRUE(emu->CopyFrom(*cpu).ok());   // host → device
  ASSERT_TRUE(back->CopyFrom(*emu).ok());  // device → host
  EXPECT_EQ(*back->ToHostF32(), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(*emu->ToHostF32(), (std::vector<float>{1, 2, 3}));
}

TEST(TensorDeviceTest, CopyBetweenTwoDevicesOrMismatchedTensorsIsRefused) {
  auto cpu = Tensor::FromHost(std::vector<float>{1, 2}, {2}, Device::kCpu);
  auto emu = Tensor::Zeros(DType::kF32, {3}, Device::kCudaEmu);
  auto emu_i32 = Tensor::Zeros(DType::kI32, {2}, Device::kCudaEmu);
  ASSERT_TRUE(cpu.ok() && emu.ok() && emu_i32.ok());
  EXPECT_EQ(emu->CopyFrom(*cpu).code(), absl::StatusCode::kInvalidArgument);      // numel
  EXPECT_EQ(emu_i32->CopyFrom(*cpu).code(), absl::StatusCode::kInvalidArgument);  // dtype
}

TEST(TensorDeviceTest, RealCudaWithoutAGpuFailsCleanly) {
  auto t = Tensor::Zeros(DType::kF32, {4}, Device::kCuda);
  EXPECT_FALSE(t.ok());
  EXPECT_FALSE(t.status().message().empty());
}

}  // namespace
}  // namespace mcserve::kernels
