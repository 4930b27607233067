// LatticeMemory on the CPU against a plain double-precision host reference of the recurrence (every
// variant, forget gate on/off, analytic renormalisation, normalised read-out), the invariants of the
// recurrence (unit-norm slots; prefill ≡ token-by-token decode, bitwise) and argument validation.
#include <cmath>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "lattice_case.h"

namespace mcserve::kernels {
namespace {

// Varlen chained calls: prefill chunks, a decode row, an empty sequence, scattered slots.
const std::vector<LatticeCall> kCalls = {
    {.lens = {5, 1, 0}, .slots = {3, 0, 2}, .seed = 100},
    {.lens = {1, 7}, .slots = {3, 1}, .seed = 200},
};

// The reference over the same calls: outputs and final pool.
LatticeResult Reference(const LatticeCase& c, const std::vector<LatticeCall>& calls) {
  std::vector<std::vector<std::vector<double>>> pool(c.num_slots * c.heads,
                                                     std::vector<std::vector<double>>(c.m, std::vector<double>(c.d)));
  for (int64_t s = 0; s < c.num_slots * c.heads; ++s) {
    for (int64_t i = 0; i < c.m; ++i) {
      for (int64_t j = 0; j < c.d; ++j) pool[s][i][j] = c.state[(s * c.m + i) * c.d + j];
    }
  }
  LatticeResult r;
  for (const LatticeCall& call : calls) {
    int64_t t_all = 0;
    for (int32_t n : call.lens) t_all += n;
    const LatticeInputs in = MakeLatticeInputs(c, t_all, call.seed);
    std::vector<float> out(t_all * c.heads * c.d);
    int64_t row = 0;
    for (size_t b = 0; b < call.lens.size(); ++b) {
      for (int32_t n = 0; n < call.lens[b]; ++n, ++row) {
        for (int64_t h = 0; h < c.heads; ++h) {
          const int64_t th = row * c.heads + h;
          const std::vector<double> o =
              LatticeReferenceStep(pool[call.slots[b] * c.heads + h], &in.q[th * c.m], &in.k[th * c.m],
                                   &in.v[th * c.d], in.gamma[th], c.forget ? in.mu[th] : 1.0, c);
          for (int64_t j = 0; j < c.d; ++j) out[th * c.d + j] = static_cast<float>(o[j]);
        }
      }
    }
    r.out.insert(r.out.end(), out.begin(), out.end());
  }
  for (const auto& slot : pool) {
    for (const auto& rowv : slot) {
      for (double x : rowv) r.state.push_back(static_cast<float>(x));
    }
  }
  return r;
}

void ExpectClose(const std::vector<float>& a, const std::vector<float>& b, float tol, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_NEAR(a[i], b[i], tol * (1.0f + std::fabs(b[i]))) << what << "[" << i << "]";
  }
}

struct Variant {
  LatticeMemoryVariant variant;
  bool analytic, normalized, forget;
};

class LatticeMemoryTest : public ::testing::TestWithParam<Variant> {};

TEST_P(LatticeMemoryTest, MatchesTheDoubleReferenceAndKeepsUnitSlots) {
  LatticeCase c;
  c.variant = GetParam().variant;
  c.analytic = GetParam().analytic;
  c.normalized = GetParam().normalized;
  c.forget = GetParam().forget;
  c.Randomize(7);
  const LatticeResult cpu = RunLattice(c, kCalls, Device::kCpu);
  ASSERT_TRUE(cpu.status.ok()) << cpu.status;
  const LatticeResult ref = Reference(c, kCalls);
  ExpectClose(cpu.out, ref.out, 2e-5f, "out");
  ExpectClose(cpu.state, ref.state, 2e-5f, "state");
  for (int64_t r = 0; r < c.num_slots * c.heads * c.m; ++r) {
    double n = 0;
    for (int64_t j = 0; j < c.d; ++j) n += double(cpu.state[r * c.d + j]) * cpu.state[r * c.d + j];
    EXPECT_NEAR(n, 1.0, 1e-5) << "slot row " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Variants, LatticeMemoryTest,
    ::testing::Values(Variant{LatticeMemoryVariant::kDec, false, false, true},
                      Variant{LatticeMemoryVariant::kDec, true, true, false},
                      Variant{LatticeMemoryVariant::kEnc, false, false, true},
                      Variant{LatticeMemoryVariant::kEnc, true, false, false},
                      Variant{LatticeMemoryVariant::kSim, false, true, true},
                      Variant{LatticeMemoryVariant::kSim, true, false, true}));

// A prefill of 9 tokens equals 9 one-token decodes, bit for bit (same per-token arithmetic).
TEST(LatticeMemoryInvariantTest, PrefillEqualsTokenByTokenDecode) {
  LatticeCase c;
  c.num_slots = 1;
  c.Randomize(8);
  const LatticeResult whole = RunLattice(c, {{.lens = {9}, .slots = {0}, .seed = 50}}, Device::kCpu);
  ASSERT_TRUE(whole.status.ok());
  // The same 9 rows fed one call per token: slice the inputs by re-drawing them once and splitting.
  const LatticeInputs in = MakeLatticeInputs(c, 9, 50);
  Tensor state = *Tensor::FromHost(c.state, {1, c.heads, c.m, c.d}, Device::kCpu);
  std::vector<float> outs;
  for (int64_t t = 0; t < 9; ++t) {
    auto slice = [&](const std::vector<float>& x, int64_t w) {
      return std::vector<float>(x.begin() + t * c.heads * w, x.begin() + (t + 1) * c.heads * w);
    };
    Tensor q = *Tensor::FromHost(slice(in.q, c.m), {1, c.heads, c.m}, Device::kCpu);
    Tensor k = *Tensor::FromHost(slice(in.k, c.m), {1, c.heads, c.m}, Device::kCpu);
    Tensor v = *Tensor::FromHost(slice(in.v, c.d), {1, c.heads, c.d}, Device::kCpu);
    Tensor g = *Tensor::FromHost(slice(in.gamma, 1), {1, c.heads}, Device::kCpu);
    Tensor mu = *Tensor::FromHost(slice(in.mu, 1), {1, c.heads}, Device::kCpu);
    Tensor out = *Tensor::Zeros(DType::kF32, {1, c.heads, c.d}, Device::kCpu);
    Tensor cu = *Tensor::FromHostI32(std::vector<int32_t>{0, 1}, {2}, Device::kCpu);
    Tensor slots = *Tensor::FromHostI32(std::vector<int32_t>{0}, {1}, Device::kCpu);
    ASSERT_TRUE(LatticeMemory({.device = Device::kCpu},
                              {.q = &q, .k = &k, .v = &v, .gamma = &g, .mu = &mu,
                               .layout = {.cu_seqlens = &cu, .slot_ids = &slots}, .state = &state, .out = &out})
                    .ok());
    const std::vector<float> o = *out.ToHostF32();
    outs.insert(outs.end(), o.begin(), o.end());
  }
  const std::vector<float> final_state = *state.ToHostF32();
  ASSERT_EQ(outs.size(), whole.out.size());
  EXPECT_EQ(std::memcmp(outs.data(), whole.out.data(), outs.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(final_state.data(), whole.state.data(), final_state.size() * sizeof(float)), 0);
}

TEST(LatticeMemoryValidationTest, RejectsBadArguments) {
  const Device cpu = Device::kCpu;
  Tensor q = *Tensor::Zeros(DType::kF32, {2, 2, 3}, cpu);
  Tensor v = *Tensor::Zeros(DType::kF32, {2, 2, 4}, cpu);
  Tensor g = *Tensor::Zeros(DType::kF32, {2, 2}, cpu);
  Tensor bad_g = *Tensor::Zeros(DType::kF32, {2, 3}, cpu);
  Tensor state = *Tensor::Zeros(DType::kF32, {1, 2, 3, 4}, cpu);
  Tensor bad_state = *Tensor::Zeros(DType::kF32, {1, 2, 4, 3}, cpu);
  Tensor out = *Tensor::Zeros(DType::kF32, {2, 2, 4}, cpu);
  Tensor cu = *Tensor::FromHostI32(std::vector<int32_t>{0, 2}, {2}, cpu);
  Tensor slots = *Tensor::FromHostI32(std::vector<int32_t>{0}, {1}, cpu);
  const Context ctx{.device = cpu};
  LatticeMemoryArgs a{.q = &q, .k = &q, .v = &v, .gamma = &g, .layout = {.cu_seqlens = &cu, .slot_ids = &slots},
                      .state = &state, .out = &out};
  EXPECT_TRUE(LatticeMemory(ctx, a).ok());
  LatticeMemoryArgs b = a;
  b.gamma = nullptr;
  EXPECT_EQ(LatticeMemory(ctx, b).code(), absl::StatusCode::kInvalidArgument);
  b = a;
  b.mu = &bad_g;
  EXPECT_NE(LatticeMemory(ctx, b).message().find("mu"), std::string::npos);
  b = a;
  b.state = &bad_state;
  EXPECT_NE(LatticeMemory(ctx, b).message().find("state"), std::string::npos);
  b = a;
  b.k = &v;
  EXPECT_NE(LatticeMemory(ctx, b).message().find("k"), std::string::npos);
}

}  // namespace
}  // namespace mcserve::kernels
