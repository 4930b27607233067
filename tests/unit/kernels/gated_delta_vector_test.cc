// The gated delta rule's vector kernels, AVX-512 (gated_delta_avx512.h) and AVX2 (gated_delta_avx2.h),
// against the generic step they replace, all as LinearMemory runs them: the same outputs and memories,
// bit for bit, over varlen batches with scattered slots, with and without decay, on one thread and on a
// pool. The generic step is the one the kernel library compiles (its flags decide which products
// fuse), reached through ForceGenericGatedDeltaForTesting.
#include <cstdint>
#include <cstring>
#include <ostream>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/linear_memory/gated_delta_dispatch.h"
#include "kernels/linear_memory/linear_memory.h"

namespace mcserve::kernels {
namespace {

struct Case {
  int64_t heads, k, v;
  bool decay;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.heads << " heads, K " << c.k << ", V " << c.v << (c.decay ? ", decay" : ", no decay");
}

// One LinearMemory run's results.
struct Result {
  std::vector<float> out, state;
};

std::vector<float> Random(int64_t n, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> x(n);
  for (float& e : x) e = d(rng);
  return x;
}

// Which step LinearMemory runs: the generic one, the AVX2 kernel, or what the CPU picks (AVX-512 where it
// has it, else AVX2).
enum class Step { kGeneric, kAvx2, kRunTime };

// Sequences of 1, 3, 1, 7 and 2 tokens in slots 6, 0, 3, 8, 1 of 9, from one seed, on `step`.
Result RunLinearMemory(const Case& c, Step step, cpu::ThreadPool* pool) {
  std::mt19937 rng(17);
  const std::vector<int32_t> cu = {0, 1, 4, 5, 12, 14}, slots = {6, 0, 3, 8, 1};
  const int64_t t = cu.back(), n = static_cast<int64_t>(slots.size()), num_slots = 9;
  auto tensor = [&](std::vector<float> x, Shape shape) { return *Tensor::FromHost(x, std::move(shape), Device::kCpu); };
  Tensor q = tensor(Random(t * c.heads * c.k, rng, -0.3f, 0.3f), {t, c.heads, c.k});
  Tensor k = tensor(Random(t * c.heads * c.k, rng, -0.3f, 0.3f), {t, c.heads, c.k});
  Tensor v = tensor(Random(t * c.heads * c.v, rng, -1.0f, 1.0f), {t, c.heads, c.v});
  Tensor decay = tensor(Random(t * c.heads, rng, 0.5f, 1.0f), {t, c.heads});
  Tensor beta = tensor(Random(t * c.heads, rng, 0.0f, 2.0f), {t, c.heads});
  Tensor state = tensor(Random(num_slots * c.heads * c.k * c.v, rng, -1.0f, 1.0f), {num_slots, c.heads, c.k, c.v});
  Tensor out = *Tensor::Zeros(DType::kF32, {t, c.heads, c.v}, Device::kCpu);
  Tensor cu_t = *Tensor::FromHostI32(cu, {n + 1}, Device::kCpu);
  Tensor slots_t = *Tensor::FromHostI32(slots, {n}, Device::kCpu);
  cpu::ForceAvx2ForTesting(step == Step::kAvx2);
  internal::ForceGenericGatedDeltaForTesting(step == Step::kGeneric);
  const absl::Status s = LinearMemory({.device = Device::kCpu, .pool = pool},
                                      {.rule = LinearMemoryRule::kGatedDelta, .q = &q, .k = &k, .v = &v,
                                       .decay = c.decay ? &decay : nullptr, .beta = &beta,
                                       .layout = {.cu_seqlens = &cu_t, .slot_ids = &slots_t}, .state = &state,
                                       .out = &out});
  cpu::ForceAvx2ForTesting(false);
  internal::ForceGenericGatedDeltaForTesting(false);
  EXPECT_TRUE(s.ok()) << s;
  return {*out.ToHostF32(), *state.ToHostF32()};
}

void ExpectBitEqual(const std::vector<float>& a, const std::vector<float>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(std::memcmp(&a[i], &b[i], sizeof(float)), 0) << what << "[" << i << "]: " << a[i] << " vs " << b[i];
  }
}

class GatedDeltaVectorTest : public ::testing::TestWithParam<Case> {};

void ExpectStepMatchesGeneric(const Case& c, Step step) {
  cpu::ThreadPool pool(3);
  for (cpu::ThreadPool* p : {static_cast<cpu::ThreadPool*>(nullptr), &pool}) {
    SCOPED_TRACE(p == nullptr ? "one thread" : "pool of 3");
    const Result generic = RunLinearMemory(c, Step::kGeneric, p), fast = RunLinearMemory(c, step, p);
    ExpectBitEqual(fast.out, generic.out, "out");
    ExpectBitEqual(fast.state, generic.state, "state");
  }
}

TEST_P(GatedDeltaVectorTest, Avx2MatchesTheGenericStepBitForBit) { ExpectStepMatchesGeneric(GetParam(), Step::kAvx2); }

TEST_P(GatedDeltaVectorTest, Avx512MatchesTheGenericStepBitForBit) {
  if (!cpu::UseAvx512()) GTEST_SKIP() << "this CPU has no AVX-512F/BW: the AVX2 kernel is the run-time choice";
  ExpectStepMatchesGeneric(GetParam(), Step::kRunTime);
}

INSTANTIATE_TEST_SUITE_P(Shapes, GatedDeltaVectorTest,
                         ::testing::Values(Case{4, 64, 64, true}, Case{4, 64, 64, false}, Case{2, 16, 32, true},
                                           Case{2, 128, 128, true}, Case{3, 32, 128, false}));

// Widths without a kernel, and the test override, run the generic step; the kernel follows the ISA.
TEST(GatedDeltaVectorStep, OnlyItsWidthsAndTheKernelOfTheIsa) {
  for (int v : {16, 24, 48, 96, 256}) EXPECT_EQ(internal::GatedDeltaVectorStep(v), nullptr) << v;
  internal::ForceGenericGatedDeltaForTesting(true);
  EXPECT_EQ(internal::GatedDeltaVectorStep(64), nullptr);
  internal::ForceGenericGatedDeltaForTesting(false);
  cpu::ForceAvx2ForTesting(true);
  EXPECT_NE(internal::GatedDeltaVectorStep(64), nullptr);
  const internal::GatedDeltaStepFn avx2 = internal::GatedDeltaVectorStep(64);
  cpu::ForceAvx2ForTesting(false);
  EXPECT_EQ(internal::GatedDeltaVectorStep(64) == avx2, !cpu::UseAvx512());
}

}  // namespace
}  // namespace mcserve::kernels
