// GatherRows: gathers exact rows for F32/BF16/F16 tables, threaded and not; rejects bad ids/shapes.
#include "kernels/gather_rows/gather_rows.h"

#include <memory>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/thread_pool.h"
#include "tests/unit/kernels/param_printers.h"

namespace mcserve::kernels {
namespace {

struct Table {
  Tensor tensor;           // [vocab, h] stored dtype
  std::vector<float> f32;  // [vocab, h] exact values
};

Table MakeTable(DType dtype, int64_t vocab, int64_t h) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  Table t;
  t.f32.resize(vocab * h);
  if (dtype == DType::kF32) {
    auto data = std::make_shared<std::vector<float>>(vocab * h);
    for (int64_t i = 0; i < vocab * h; ++i) t.f32[i] = (*data)[i] = u(rng);
    t.tensor = Tensor::WrapHost(data->data(), dtype, {vocab, h}, data);
    return t;
  }
  auto bits = std::make_shared<std::vector<uint16_t>>(vocab * h);
  for (int64_t i = 0; i < vocab * h; ++i) {
    uint16_t b = dtype == DType::kBF16 ? F32ToBf16(u(rng)) : static_cast<uint16_t>(rng() & 0x7bffu);  // finite f16
    (*bits)[i] = b;
    t.f32[i] = dtype == DType::kBF16 ? Bf16ToF32(b) : F16ToF32(b);
  }
  t.tensor = Tensor::WrapHost(bits->data(), dtype, {vocab, h}, bits);
  return t;
}

class GatherRowsDTypeTest : public testing::TestWithParam<DType> {};

TEST_P(GatherRowsDTypeTest, GathersRows) {
  cpu::ThreadPool pool(2);
  for (cpu::ThreadPool* p : {static_cast<cpu::ThreadPool*>(nullptr), &pool}) {
    for (int64_t h : {1, 13, 300}) {
      const int64_t vocab = 257;
      Table table = MakeTable(GetParam(), vocab, h);
      std::vector<int32_t> ids = {0, 256, 3, 3, 100};
      for (int i = 0; i < 400; ++i) ids.push_back((i * 37) % vocab);  // enough rows to thread
      const int64_t m = ids.size();
      auto id_t = Tensor::FromHostI32(ids, {m}, Device::kCpu);
      auto out = Tensor::Zeros(DType::kF32, {m, h}, Device::kCpu);
      ASSERT_TRUE(id_t.ok() && out.ok());
      Context ctx;
      ctx.pool = p;
      ASSERT_TRUE(GatherRows(ctx, {&table.tensor, &*id_t, &*out}).ok());
      std::vector<float> got = *out->ToHostF32();
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < h; ++j) {
          ASSERT_EQ(got[i * h + j], table.f32[ids[i] * h + j]) << "row " << i << " col " << j;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTableTypes, GatherRowsDTypeTest, testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                         [](const testing::TestParamInfo<DType>& info) { return std::string(DTypeName(info.param)); });

TEST(GatherRowsTest, RejectsIdsOutsideVocab) {
  auto table = *Tensor::Zeros(DType::kF32, {10, 4}, Device::kCpu);
  auto out = *Tensor::FromHost(std::vector<float>(8, 7.0f), {2, 4}, Device::kCpu);
  for (int32_t bad : {10, -1, 1 << 30}) {
    auto ids = *Tensor::FromHostI32(std::vector<int32_t>{2, bad}, {2}, Device::kCpu);
    absl::Status s = GatherRows({}, {&table, &ids, &out});
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find(std::to_string(bad)), std::string::npos) << s;
    EXPECT_NE(s.message().find("10"), std::string::npos) << s;
  }
  EXPECT_EQ(*out.ToHostF32(), std::vector<float>(8, 7.0f));  // nothing written on failure
}

TEST(GatherRowsTest, RejectsBadShapesAndTypes) {
  auto table = *Tensor::Zeros(DType::kF32, {10, 4}, Device::kCpu);
  auto table_i32 = *Tensor::Zeros(DType::kI32, {10, 4}, Device::kCpu);
  auto ids = *Tensor::FromHostI32(std::vector<int32_t>{1, 2}, {2}, Device::kCpu);
  auto ids_f32 = *Tensor::Zeros(DType::kF32, {2}, Device::kCpu);
  auto ids_2d = *Tensor::FromHostI32(std::vector<int32_t>{1, 2}, {1, 2}, Device::kCpu);
  auto out = *Tensor::Zeros(DType::kF32, {2, 4}, Device::kCpu);
  auto out_wrong_h = *Tensor::Zeros(DType::kF32, {2, 5}, Device::kCpu);
  auto out_wrong_m = *Tensor::Zeros(DType::kF32, {3, 4}, Device::kCpu);
  auto out_bf16 = *Tensor::Zeros(DType::kBF16, {2, 4}, Device::kCpu);
  const Context ctx;
  EXPECT_TRUE(GatherRows(ctx, {&table, &ids, &out}).ok());
  for (const GatherRowsArgs& a : std::vector<GatherRowsArgs>{{&table_i32, &ids, &out},
                                                           {&table, &ids_f32, &out},
                                                           {&table, &ids_2d, &out},
                                                           {&table, &ids, &out_wrong_h},
                                                           {&table, &ids, &out_wrong_m},
                                                           {&table, &ids, &out_bf16},
                                                           {nullptr, &ids, &out},
                                                           {&table, nullptr, &out},
                                                           {&table, &ids, nullptr}}) {
    EXPECT_EQ(GatherRows(ctx, a).code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(GatherRowsTest, CudaDeviceFailsWithoutAGpu) {
  auto table = *Tensor::Zeros(DType::kF32, {10, 4}, Device::kCpu);
  auto ids = *Tensor::FromHostI32(std::vector<int32_t>{1, 2}, {2}, Device::kCpu);
  auto out = *Tensor::Zeros(DType::kF32, {2, 4}, Device::kCpu);
  Context ctx;
  ctx.device = Device::kCuda;
  EXPECT_FALSE(GatherRows(ctx, {&table, &ids, &out}).ok());  // no GPU here: never succeeds
}

}  // namespace
}  // namespace mcserve::kernels
