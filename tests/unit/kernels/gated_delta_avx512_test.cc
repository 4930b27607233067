// The gated delta rule on AVX-512 (gated_delta_avx512.h) against the generic step it replaces, both as
// LinearMemory runs them: the same outputs and memories, bit for bit, over varlen batches with scattered
// slots, with and without decay, on one thread and on a pool. The generic step is the one the kernel
// library compiles (its flags decide which products fuse), reached by forcing the AVX2 paths.
#include <cstdint>
#include <cstring>
#include <ostream>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/linear_memory/gated_delta_avx512.h"
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

// Sequences of 1, 3, 1, 7 and 2 tokens in slots 6, 0, 3, 8, 1 of 9, from one seed; AVX2 forced or not.
Result RunLinearMemory(const Case& c, bool force_avx2, cpu::ThreadPool* pool) {
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
  cpu::ForceAvx2ForTesting(force_avx2);
  const absl::Status s = LinearMemory({.device = Device::kCpu, .pool = pool},
                                      {.rule = LinearMemoryRule::kGatedDelta, .q = &q, .k = &k, .v = &v,
                                       .decay = c.decay ? &decay : nullptr, .beta = &beta,
                                       .layout = {.cu_seqlens = &cu_t, .slot_ids = &slots_t}, .state = &state,
                                       .out = &out});
  cpu::ForceAvx2ForTesting(false);
  EXPECT_TRUE(s.ok()) << s;
  return {*out.ToHostF32(), *state.ToHostF32()};
}

void ExpectBitEqual(const std::vector<float>& a, const std::vector<float>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(std::memcmp(&a[i], &b[i], sizeof(float)), 0) << what << "[" << i << "]: " << a[i] << " vs " << b[i];
  }
}

class GatedDeltaAvx512Test : public ::testing::TestWithParam<Case> {};

TEST_P(GatedDeltaAvx512Test, MatchesTheGenericStepBitForBit) {
  const Case c = GetParam();
  if (!cpu::UseAvx512()) GTEST_SKIP() << "this CPU has no AVX-512F/BW: only the generic step runs";
  ASSERT_TRUE(internal::GatedDeltaAvx512Serves(static_cast<int>(c.v)));
  cpu::ThreadPool pool(3);
  for (cpu::ThreadPool* p : {static_cast<cpu::ThreadPool*>(nullptr), &pool}) {
    SCOPED_TRACE(p == nullptr ? "one thread" : "pool of 3");
    const Result generic = RunLinearMemory(c, /*force_avx2=*/true, p), fast = RunLinearMemory(c, /*force_avx2=*/false, p);
    ExpectBitEqual(fast.out, generic.out, "out");
    ExpectBitEqual(fast.state, generic.state, "state");
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, GatedDeltaAvx512Test,
                         ::testing::Values(Case{4, 64, 64, true}, Case{4, 64, 64, false}, Case{2, 16, 32, true},
                                           Case{2, 128, 128, true}, Case{3, 32, 128, false}));

// Widths it does not serve fall back to the generic step (and the AVX2 force turns it off everywhere).
TEST(GatedDeltaAvx512Serves, OnlyItsWidthsAndNotWhenAvx2IsForced) {
  for (int v : {16, 24, 48, 96, 256}) EXPECT_FALSE(internal::GatedDeltaAvx512Serves(v)) << v;
  cpu::ForceAvx2ForTesting(true);
  EXPECT_FALSE(internal::GatedDeltaAvx512Serves(64));
  cpu::ForceAvx2ForTesting(false);
  EXPECT_EQ(internal::GatedDeltaAvx512Serves(64), cpu::UseAvx512());
}

}  // namespace
}  // namespace mcserve::kernels
