// GatherRows on the CUDA emulator against the CPU backend: F32/BF16/F16 tables, row widths that are
// not multiples of the block, repeated ids, both emulator schedules bit-identical (the gather is
// exact, so results must equal the CPU's), out-of-range ids detected by the device kernel.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "kernels/core/tensor_data.h"
#include "kernels/core/device_runtime.h"
#include "kernels/cuda/emu/emu.h"
#include "kernels/gather_rows/gather_rows.h"
#include "tests/unit/kernels/emu_test_util.h"
#include "tests/unit/kernels/param_printers.h"

namespace mcserve::kernels {
namespace {

// The device under test: cuda-emu, or cuda with MCSERVE_TEST_DEVICE=cuda (emu_test_device.h).
const Device kEmu = DeviceUnderTest();

// A random table [vocab, h] of `dtype` as raw bytes.
std::vector<uint8_t> RandomTable(int64_t vocab, int64_t h, DType dtype, uint32_t seed) {
  std::vector<uint8_t> bytes(vocab * h * DTypeSize(dtype));
  if (dtype == DType::kF32) {
    const std::vector<float> v = RandomVector(vocab * h, seed);
    std::memcpy(bytes.data(), v.data(), bytes.size());
  } else {
    const std::vector<uint16_t> v = RandomBits(vocab * h, dtype, seed);
    std::memcpy(bytes.data(), v.data(), bytes.size());
  }
  return bytes;
}

absl::StatusOr<std::vector<float>> GatherRowsOn(Device d, const std::vector<uint8_t>& table, DType dtype,
                                               int64_t vocab, int64_t h, const std::vector<int32_t>& ids) {
  Tensor t = RawTensor(table.data(), dtype, {vocab, h}, d);
  Tensor it = *Tensor::FromHostI32(ids, {static_cast<int64_t>(ids.size())}, d);
  Tensor out = *Tensor::Zeros(DType::kF32, {static_cast<int64_t>(ids.size()), h}, d);
  absl::Status s = GatherRows(Context{.device = d}, {.table = &t, .ids = &it, .out = &out});
  if (!s.ok()) return s;
  return out.ToHostF32();
}

class GatherRowsEmuTest : public testing::TestWithParam<DType> {};

TEST_P(GatherRowsEmuTest, MatchesCpuExactly) {
  const DType dtype = GetParam();
  const int64_t shapes[][3] = {{1, 1, 1}, {7, 33, 5}, {50, 300, 9}, {13, 256, 17}, {4, 1000, 3}};  // vocab, h, m
  uint32_t seed = 7;
  for (auto [vocab, h, m] : shapes) {
    const std::vector<uint8_t> table = RandomTable(vocab, h, dtype, seed++);
    std::mt19937 rng(seed++);
    std::vector<int32_t> ids(m);
    for (int32_t& id : ids) id = static_cast<int32_t>(rng() % vocab);
    ids.back() = static_cast<int32_t>(vocab - 1);  // the last row, and a repeat when m > vocab
    const std::vector<float> want = *GatherRowsOn(Device::kCpu, table, dtype, vocab, h, ids);
    const std::vector<float> got = RunBothSchedules([&] { return *GatherRowsOn(kEmu, table, dtype, vocab, h, ids); });
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << "vocab " << vocab << " h " << h << " at " << i;
    // Non-trivial content: the first output row is the widened table row of ids[0].
    EXPECT_NE(want[0], 0.0f);
  }
}

INSTANTIATE_TEST_SUITE_P(AllTableTypes, GatherRowsEmuTest, testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                         [](const testing::TestParamInfo<DType>& info) { return std::string(DTypeName(info.param)); });

TEST(GatherRowsEmuBadInputTest, OutOfRangeIdFailsOnDevice) {
  const std::vector<uint8_t> table = RandomTable(10, 40, DType::kF32, 3);
  for (int32_t bad : {10, -1, 1 << 30}) {
    absl::StatusOr<std::vector<float>> r = GatherRowsOn(kEmu, table, DType::kF32, 10, 40, {1, 2, bad, 3});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("position 2"), std::string::npos) << r.status();
  }
  // The flag does not stick: a valid call afterwards succeeds.
  EXPECT_TRUE(GatherRowsOn(kEmu, table, DType::kF32, 10, 40, {9, 0}).ok());
}

TEST(GatherRowsEmuBadInputTest, EmptyIdsIsNoOp) {
  const std::vector<uint8_t> table = RandomTable(4, 8, DType::kF32, 5);
  absl::StatusOr<std::vector<float>> r = GatherRowsOn(kEmu, table, DType::kF32, 4, 8, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->empty());
}

TEST(GatherRowsEmuBadInputTest, InvalidShapesFailValidationOnEmu) {
  Context ctx{.device = kEmu};
  Tensor table = *Tensor::Zeros(DType::kF32, {4, 8}, kEmu);
  Tensor ids = *Tensor::FromHostI32(std::vector<int32_t>{0, 1}, {2}, kEmu);
  Tensor wrong_out = *Tensor::Zeros(DType::kF32, {2, 7}, kEmu);
  EXPECT_EQ(GatherRows(ctx, {.table = &table, .ids = &ids, .out = &wrong_out}).code(),
            absl::StatusCode::kInvalidArgument);
  Tensor cpu_ids = *Tensor::FromHostI32(std::vector<int32_t>{0, 1}, {2}, Device::kCpu);
  Tensor out = *Tensor::Zeros(DType::kF32, {2, 8}, kEmu);
  EXPECT_EQ(GatherRows(ctx, {.table = &table, .ids = &cpu_ids, .out = &out}).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mcserve::kernels
