// McSegmentPool and McLevelPool: the pooled key of each token's open segment, against direct sums
// over the segment's tokens; chunking through the slot state; GQA head mapping; bad inputs.
#include "gtest/gtest.h"
#include "kernels/mc_pool/mc_pool.h"
#include "random_inputs.h"

namespace mcserve::kernels {
namespace {

constexpr int64_t kHk = 1, kHs = 2, kK = 3;

// Expected pool of token n (1-based) over keys [T, Hk, K] of one sequence for state head h:
// the mean (or sum) of the keys of positions [first, n].
float Expected(const std::vector<float>& keys, int64_t first, int64_t n, int64_t h, int64_t d, bool mean) {
  double s = 0;
  for (int64_t i = first; i <= n; ++i) s += keys[((i - 1) * kHk + h / (kHs / kHk)) * kK + d];
  return static_cast<float>(mean ? s / (n - first + 1) : s);
}

// Runs `rows` rows starting at position `start` (1-based) through the pool of slot 1 of 2.
std::vector<float> RunPool(bool logarithmic, const std::vector<float>& keys, int64_t start, int64_t rows, Tensor& state,
                       int64_t segment, bool mean) {
  Tensor k = *Tensor::FromHost(std::span<const float>(keys).subspan((start - 1) * kHk * kK, rows * kHk * kK),
                               {rows, kHk, kK}, Device::kCpu);
  const int32_t cu[2] = {0, static_cast<int32_t>(rows)}, slot = 1;
  Tensor cu_t = *Tensor::FromHostI32(cu, {2}, Device::kCpu), slot_t = *Tensor::FromHostI32({&slot, 1}, {1}, Device::kCpu);
  Tensor out = *Tensor::Zeros(DType::kF32, {rows, kHs, kK}, Device::kCpu);
  const BatchLayout layout{.cu_seqlens = &cu_t, .slot_ids = &slot_t};
  absl::Status s;
  if (logarithmic) {
    const int32_t first = static_cast<int32_t>(start);
    Tensor first_t = *Tensor::FromHostI32({&first, 1}, {1}, Device::kCpu);
    s = McLevelPool({}, {.k = &k, .layout = layout, .first_position = &first_t, .level_sums = &state, .mean = mean,
                         .out = &out});
  } else {
    const int32_t j = static_cast<int32_t>((start - 1) % segment + 1);
    Tensor first_t = *Tensor::FromHostI32({&j, 1}, {1}, Device::kCpu);
    s = McSegmentPool({}, {.k = &k, .layout = layout, .first_local = &first_t, .segment_size = segment, .mean = mean,
                           .pool_sum = &state, .out = &out});
  }
  EXPECT_TRUE(s.ok()) << s;
  return *out.ToHostF32();
}

TEST(McPoolTest, ConstantSegmentsInChunks) {
  const int64_t total = 23, c = 4;
  const std::vector<float> keys = RandomVector(total * kHk * kK, 7);
  for (bool mean : {true, false}) {
    Tensor state = *Tensor::Zeros(DType::kF32, {2, kHs, kK}, Device::kCpu);
    int64_t n = 1;
    for (int64_t chunk : {3, 1, 5, 4, 10}) {
      const std::vector<float> got = RunPool(false, keys, n, chunk, state, c, mean);
      for (int64_t r = 0; r < chunk; ++r, ++n) {
        const int64_t first = (n - 1) / c * c + 1;
        for (int64_t h = 0; h < kHs; ++h) {
          for (int64_t d = 0; d < kK; ++d) {
            EXPECT_NEAR(got[(r * kHs + h) * kK + d], Expected(keys, first, n, h, d, mean), 1e-5) << "n " << n;
          }
        }
      }
    }
  }
}

TEST(McPoolTest, LogarithmicBlocksInChunks) {
  const int64_t total = 40;
  const std::vector<float> keys = RandomVector(total * kHk * kK, 8);
  Tensor state = *Tensor::Zeros(DType::kF32, {2, kHs, 8, kK}, Device::kCpu);
  int64_t n = 1;
  for (int64_t chunk : {1, 6, 2, 13, 18}) {
    const std::vector<float> got = RunPool(true, keys, n, chunk, state, 0, true);
    for (int64_t r = 0; r < chunk; ++r, ++n) {
      const int64_t first = n - (n & -n) + 1;  // the online block [n − lowbit(n) + 1, n]
      for (int64_t h = 0; h < kHs; ++h) {
        for (int64_t d = 0; d < kK; ++d) {
          EXPECT_NEAR(got[(r * kHs + h) * kK + d], Expected(keys, first, n, h, d, true), 1e-5) << "n " << n;
        }
      }
    }
  }
}

TEST(McPoolTest, RejectsBadInput) {
  Tensor k = *Tensor::Zeros(DType::kF32, {2, kHk, kK}, Device::kCpu);
  Tensor out = *Tensor::Zeros(DType::kF32, {2, kHs, kK}, Device::kCpu);
  Tensor sum = *Tensor::Zeros(DType::kF32, {1, kHs, kK}, Device::kCpu);
  const int32_t cu[2] = {0, 2}, slot = 0, bad_j = 5;
  Tensor cu_t = *Tensor::FromHostI32(cu, {2}, Device::kCpu), slot_t = *Tensor::FromHostI32({&slot, 1}, {1}, Device::kCpu);
  Tensor j = *Tensor::FromHostI32({&bad_j, 1}, {1}, Device::kCpu);
  auto s = McSegmentPool({}, {.k = &k, .layout = {.cu_seqlens = &cu_t, .slot_ids = &slot_t}, .first_local = &j,
                              .segment_size = 4, .pool_sum = &sum, .out = &out});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  Tensor levels = *Tensor::Zeros(DType::kF32, {1, kHs, 2, kK}, Device::kCpu);  // positions < 4 only
  const int32_t first = 3;
  Tensor first_t = *Tensor::FromHostI32({&first, 1}, {1}, Device::kCpu);
  s = McLevelPool({}, {.k = &k, .layout = {.cu_seqlens = &cu_t, .slot_ids = &slot_t}, .first_position = &first_t,
                       .level_sums = &levels, .out = &out});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("McLevelPool"), std::string::npos);
}

}  // namespace
}  // namespace mcserve::kernels
