// Test helpers for ops on the CUDA emulator (or a real GPU: emu_test_device.h): raw 16-bit weights,
// device tensors from raw bytes, and running an emulated op under both thread schedules (which must
// agree bit for bit).
#pragma once

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/core/tensor.h"
#include "kernels/core/tensor_data.h"
#include "kernels/core/device_runtime.h"
#include "kernels/cuda/emu/emu.h"
#include "random_inputs.h"
#include "tests/unit/kernels/emu_test_device.h"

namespace mcserve::kernels {

// Random 16-bit float bits of `dtype` (BF16 or F16) with magnitudes around 2^-3..2^1, any sign.
inline std::vector<uint16_t> RandomBits(int64_t size, DType dtype, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint16_t> bits(size);
  for (uint16_t& b : bits) {
    const uint32_t r = rng();
    if (dtype == DType::kBF16) {
      b = static_cast<uint16_t>(((r & 1u) << 15) | ((124u + (r >> 1) % 5u) << 7) | ((r >> 8) & 0x7fu));
    } else {
      b = static_cast<uint16_t>(((r & 1u) << 15) | ((12u + (r >> 1) % 5u) << 10) | ((r >> 8) & 0x3ffu));
    }
  }
  return bits;
}

// A tensor of `dtype` on `d` holding `bytes` (raw element storage).
inline Tensor RawTensor(const void* bytes, DType dtype, const Shape& shape, Device d) {
  Tensor t = *Tensor::Zeros(dtype, shape, d);
  if (t.nbytes() == 0) return t;
  if (d == Device::kCpu) {
    std::memcpy(RawData(t), bytes, t.nbytes());
  } else {
    EXPECT_TRUE((*RuntimeFor(d))->CopyHostToDevice(RawData(t), bytes, t.nbytes()).ok());
  }
  return t;
}

// Random raw storage of `dtype` for `count` elements.
inline std::vector<uint8_t> RandomRaw(int64_t count, DType dtype, uint32_t seed) {
  std::vector<uint8_t> bytes(count * DTypeSize(dtype));
  if (dtype == DType::kF32) {
    const std::vector<float> v = RandomVector(count, seed);
    std::memcpy(bytes.data(), v.data(), bytes.size());
  } else {
    const std::vector<uint16_t> v = RandomBits(count, dtype, seed);
    std::memcpy(bytes.data(), v.data(), bytes.size());
  }
  return bytes;
}

// Runs `run` under both schedules; requires bit-identical results and returns them. On a real GPU
// (MCSERVE_TEST_DEVICE=cuda) runs it once.
inline std::vector<float> RunBothSchedules(const std::function<std::vector<float>()>& run) {
  auto [fwd, rev] = RunSchedules(run);
  EXPECT_TRUE(fwd.size() == rev.size() && std::memcmp(fwd.data(), rev.data(), fwd.size() * sizeof(float)) == 0)
      << "schedules differ";
  return fwd;
}

// |a − b| ≤ tol · (1 + |b|) elementwise (NaN fails).
inline void ExpectNear(const std::vector<float>& a, const std::vector<float>& b, float tol, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < a.size() && bad < 5; ++i) {
    if (!(std::fabs(a[i] - b[i]) <= tol * (1.0f + std::fabs(b[i])))) {
      ADD_FAILURE() << what << "[" << i << "]: " << a[i] << " vs " << b[i];
      ++bad;
    }
  }
}

}  // namespace mcserve::kernels
