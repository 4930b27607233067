// AssocMemory on the CPU against a naive double implementation (read, then the parallel write with
// first writes, γ-correction on and off, γ clipped at both ends, scattered slots, an empty
// sequence, untouched slots), and the validation errors.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "assoc_case.h"

namespace mcserve::kernels {
namespace {

void ExpectNear(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 2e-5 * (1.0 + std::fabs(want[i]))) << what << " at " << i;
  }
}

void CheckAgainstReference(const AssocCase& c) {
  const absl::StatusOr<AssocResult> got = RunAssoc(c, Device::kCpu);
  ASSERT_TRUE(got.ok()) << got.status();
  const AssocResult want = AssocReference(c);
  ExpectNear(got->h, want.h, "h");
  ExpectNear(got->delta, want.delta, "delta");
  ExpectNear(got->gamma, want.gamma, "gamma");
  ExpectNear(got->a, want.a, "a");
  ExpectNear(got->z, want.z, "z");
}

TEST(AssocMemoryTest, MatchesDoubleReference) {
  AssocCase c;
  c.Randomize(7);
  CheckAgainstReference(c);
  c.correction = false;
  CheckAgainstReference(c);
}

TEST(AssocMemoryTest, GammaClipsAtBothEnds) {
  AssocCase c;
  c.Randomize(11);
  const AssocResult r = AssocReference(c);
  // row 0 (slot 2, not first): a single large feature, |φ|² ≫ φ·z: γ near 1 but < 1; a row whose
  // keys are all within z's support gets γ clipped to 0 somewhere in the batch.
  bool saw_zero = false;
  for (float g : r.gamma) saw_zero |= g == 0.0f;
  EXPECT_TRUE(saw_zero);
  EXPECT_GT(r.gamma[0], 0.0f);
  CheckAgainstReference(c);
}

TEST(AssocMemoryTest, FirstWriteIgnoresTheOldState) {
  AssocCase c;
  c.lens = {2};
  c.slots = {1};
  c.first = {1};
  c.Randomize(3);
  const absl::StatusOr<AssocResult> r = RunAssoc(c, Device::kCpu);
  ASSERT_TRUE(r.ok()) << r.status();
  for (float g : r->gamma) EXPECT_EQ(g, 1.0f);
  for (int64_t i = 0; i < 2 * c.d; ++i) EXPECT_FLOAT_EQ(r->delta[i], c.beta[i / c.d] * c.vn[i]);
  // slots other than 1 untouched
  for (int64_t s : {0, 2, 3}) {
    for (int64_t e = 0; e < c.nf * c.d; ++e) EXPECT_EQ(r->a[s * c.nf * c.d + e], c.a[s * c.nf * c.d + e]);
  }
}

TEST(AssocMemoryTest, ZeroStateReadsZero) {
  AssocCase c;
  c.Randomize(5);
  std::fill(c.a.begin(), c.a.end(), 0.0f);
  std::fill(c.z.begin(), c.z.end(), 0.0f);
  const absl::StatusOr<AssocResult> r = RunAssoc(c, Device::kCpu);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->h, c.vn);  // 0 / eps = 0: the read before the first write adds exactly nothing
}

TEST(AssocMemoryTest, RejectsBadArguments) {
  const Device d = Device::kCpu;
  Tensor fq = *Tensor::Zeros(DType::kF32, {3, 6}, d), h = *Tensor::Zeros(DType::kF32, {3, 4}, d);
  Tensor a = *Tensor::Zeros(DType::kF32, {2, 6, 4}, d), z = *Tensor::Zeros(DType::kF32, {2, 6}, d);
  Tensor cu = *Tensor::FromHostI32(std::vector<int32_t>{0, 3}, {2}, d);
  Tensor slots = *Tensor::FromHostI32(std::vector<int32_t>{1}, {1}, d);
  const BatchLayout layout{.cu_seqlens = &cu, .slot_ids = &slots};
  EXPECT_TRUE(AssocRead({}, {.fq = &fq, .layout = layout, .a = &a, .z = &z, .h = &h}).ok());
  Tensor bad_z = *Tensor::Zeros(DType::kF32, {2, 5}, d);
  EXPECT_FALSE(AssocRead({}, {.fq = &fq, .layout = layout, .a = &a, .z = &bad_z, .h = &h}).ok());
  Tensor bad_h = *Tensor::Zeros(DType::kF32, {3, 5}, d);
  EXPECT_FALSE(AssocRead({}, {.fq = &fq, .layout = layout, .a = &a, .z = &z, .h = &bad_h}).ok());
  EXPECT_FALSE(AssocRead({}, {.fq = &fq, .layout = layout, .a = &a, .z = &z, .eps = 0.0f, .h = &h}).ok());
  EXPECT_FALSE(AssocRead({}, {.fq = &fq, .layout = layout, .a = &a, .z = &z, .h = &fq}).ok());
  Tensor bad_slots = *Tensor::FromHostI32(std::vector<int32_t>{2}, {1}, d);
  EXPECT_FALSE(AssocRead({}, {.fq = &fq, .layout = {.cu_seqlens = &cu, .slot_ids = &bad_slots}, .a = &a, .z = &z,
                              .h = &h}).ok());
  Tensor vn = *Tensor::Zeros(DType::kF32, {3, 4}, d), beta = *Tensor::Zeros(DType::kF32, {3}, d);
  Tensor delta = *Tensor::Zeros(DType::kF32, {3, 4}, d), gamma = *Tensor::Zeros(DType::kF32, {3}, d);
  Tensor first = *Tensor::FromHostI32(std::vector<int32_t>{0}, {1}, d);
  AssocWriteArgs w{.fk = &fq, .vn = &vn, .beta = &beta, .first = &first, .layout = layout, .delta = &delta,
                   .gamma = &gamma, .a = &a, .z = &z};
  EXPECT_TRUE(AssocWrite({}, w).ok());
  AssocWriteArgs no_first = w;
  no_first.first = nullptr;
  EXPECT_FALSE(AssocWrite({}, no_first).ok());
  AssocWriteArgs bad_beta = w;
  bad_beta.beta = &gamma;
  bad_beta.gamma = &beta;
  EXPECT_TRUE(AssocWrite({}, bad_beta).ok());  // same shapes: allowed
  bad_beta.gamma = &delta;
  EXPECT_FALSE(AssocWrite({}, bad_beta).ok());
  AssocWriteArgs alias = w;
  alias.delta = &vn;
  alias.vn = &vn;
  EXPECT_FALSE(AssocWrite({}, alias).ok());
}

}  // namespace
}  // namespace mcserve::kernels
