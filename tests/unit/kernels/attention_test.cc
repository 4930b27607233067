// Attention on the CPU against a naive double-precision implementation written here: varlen batches
// mixing prefill chunks, decode rows and an empty sequence on scattered slots, chained calls through
// the caches (and a segment restart at cached = 0), grouped heads, dh in {1, 7, 64, 128}, logits far
// beyond exp's float range; chained calls ≡ one call over the concatenation and any thread count,
// bitwise; capacity overflow and every validation error by name.
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "attention_case.h"

namespace mcserve::kernels {
namespace {

// Prefill chunks with and without earlier context, decode rows, an empty sequence, scattered
// slots, then decodes on those slots, then a chunk on a slot restarted at position 0.
const std::vector<AttentionCall> kCalls = {
    {.lens = {5, 1, 0, 3}, .slots = {3, 0, 2, 1}, .cached = {0, 4, 7, 2}, .seed = 100},
    {.lens = {1, 1, 1}, .slots = {3, 0, 1}, .cached = {5, 5, 5}, .seed = 200},
    {.lens = {6, 2}, .slots = {2, 3}, .cached = {6, 6}, .seed = 300},
    {.lens = {4, 1}, .slots = {0, 1}, .cached = {0, 6}, .seed = 400},
};

// The op written naively: caches as plain arrays, every sum in double. Same calls, same result layout.
AttentionResult Reference(const AttentionCase& c, const std::vector<AttentionCall>& calls) {
  AttentionResult r{.k_cache = c.k_cache, .v_cache = c.v_cache};
  const double scale = c.scale.has_value() ? *c.scale : 1.0 / std::sqrt(static_cast<double>(c.dh));
  auto at = [&](int64_t slot, int64_t pos, int64_t g) { return ((slot * c.capacity + pos) * c.hkv + g) * c.dh; };
  for (const AttentionCall& call : calls) {
    const AttentionInputs in = CallInputs(c, call);
    std::vector<float> out(CallRows(call) * c.hq * c.dh);
    int64_t row0 = 0;
    for (size_t b = 0; b < call.lens.size(); ++b) {
      const int64_t slot = call.slots[b], n = call.lens[b], cached = call.cached[b];
      for (int64_t j = 0; j < n; ++j) {
        for (int64_t g = 0; g < c.hkv; ++g) {
          for (int64_t d = 0; d < c.dh; ++d) {
            r.k_cache[at(slot, cached + j, g) + d] = in.k[((row0 + j) * c.hkv + g) * c.dh + d];
            r.v_cache[at(slot, cached + j, g) + d] = in.v[((row0 + j) * c.hkv + g) * c.dh + d];
          }
        }
      }
      for (int64_t j = 0; j < n; ++j) {
        for (int64_t h = 0; h < c.hq; ++h) {
          const int64_t g = h / (c.hq / c.hkv), len = cached + j + 1;
          const float* q = &in.q[((row0 + j) * c.hq + h) * c.dh];
          std::vector<double> z(len);
          double m = -INFINITY;
          for (int64_t s = 0; s < len; ++s) {
            double dot = 0;
            for (int64_t d = 0; d < c.dh; ++d) dot += double(q[d]) * r.k_cache[at(slot, s, g) + d];
            z[s] = scale * dot;
            m = std::max(m, z[s]);
          }
          double sum = 0;
          for (double& x : z) sum += (x = std::exp(x - m));
          for (int64_t d = 0; d < c.dh; ++d) {
            double o = 0;
            for (int64_t s = 0; s < len; ++s) o += z[s] * r.v_cache[at(slot, s, g) + d];
            out[((row0 + j) * c.hq + h) * c.dh + d] = static_cast<float>(o / sum);
          }
        }
      }
      row0 += n;
    }
    r.out.insert(r.out.end(), out.begin(), out.end());
  }
  return r;
}

void ExpectClose(const std::vector<float>& a, const std::vector<float>& b, float tol, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_NEAR(a[i], b[i], tol * (1.0f + std::fabs(b[i]))) << what << "[" << i << "]";
  }
}

bool BitEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Float rounding of a dot product of dh terms and a softmax over ≤ 12 positions, against double.
constexpr float kTol = 2e-5f;

struct Heads {
  int64_t hq, hkv, dh;
};

void PrintTo(const Heads& h, std::ostream* os) { *os << "Hq=" << h.hq << " Hkv=" << h.hkv << " dh=" << h.dh; }

class AttentionTest : public ::testing::TestWithParam<Heads> {};

TEST_P(AttentionTest, MatchesTheDoubleReference) {
  AttentionCase c;
  c.hq = GetParam().hq;
  c.hkv = GetParam().hkv;
  c.dh = GetParam().dh;
  c.Randomize(7);
  const AttentionResult cpu = RunAttention(c, kCalls, Device::kCpu);
  ASSERT_TRUE(cpu.status.ok()) << cpu.status;
  const AttentionResult ref = Reference(c, kCalls);
  ExpectClose(cpu.out, ref.out, kTol, "out");
  EXPECT_EQ(cpu.k_cache, ref.k_cache);  // appends are copies
  EXPECT_EQ(cpu.v_cache, ref.v_cache);
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionTest,
                         ::testing::Values(Heads{2, 2, 1}, Heads{2, 2, 7}, Heads{2, 2, 64}, Heads{2, 2, 128},
                                           Heads{4, 2, 7}, Heads{4, 2, 64}, Heads{4, 1, 128}, Heads{3, 3, 16}));

// Logits around ±80..300: exp(z) alone overflows float, the max-subtracted softmax does not.
// A logit's float error grows with its size (≈ |z|·ε·√dh), so the weights are good to ~1e-5 relative.
TEST(AttentionLargeLogitsTest, StayFiniteAndMatchTheReference) {
  AttentionCase c;
  c.dh = 64;
  c.magnitude = 16.0f;  // scale·⟨q, k⟩ has a spread of ~85
  c.Randomize(8);
  for (float& x : c.k_cache) x *= 16.0f;
  const AttentionResult cpu = RunAttention(c, kCalls, Device::kCpu);
  ASSERT_TRUE(cpu.status.ok()) << cpu.status;
  const AttentionResult ref = Reference(c, kCalls);
  for (float o : cpu.out) ASSERT_TRUE(std::isfinite(o));
  ExpectClose(cpu.out, ref.out, 1e-4f, "out");
}

TEST(AttentionLargeLogitsTest, ExplicitScaleIsUsed) {
  AttentionCase c;
  c.dh = 8;
  c.scale = 20.0f;  // logits ~ ±50
  c.Randomize(9);
  const AttentionResult cpu = RunAttention(c, kCalls, Device::kCpu);
  ASSERT_TRUE(cpu.status.ok()) << cpu.status;
  ExpectClose(cpu.out, Reference(c, kCalls).out, 1e-4f, "out");
}

TEST(AttentionInvariantTest, DefaultScaleIsOneOverSqrtDh) {
  AttentionCase c;
  c.dh = 7;
  c.Randomize(10);
  const AttentionResult dflt = RunAttention(c, kCalls, Device::kCpu);
  c.scale = 1.0f / std::sqrt(7.0f);
  const AttentionResult explicit_scale = RunAttention(c, kCalls, Device::kCpu);
  ASSERT_TRUE(dflt.status.ok() && explicit_scale.status.ok());
  EXPECT_TRUE(BitEqual(dflt.out, explicit_scale.out));
}

// Rows [begin, end) of a [T, heads, dh] input.
std::vector<float> Slice(const std::vector<float>& x, int64_t begin, int64_t end, int64_t width) {
  return std::vector<float>(x.begin() + begin * width, x.begin() + end * width);
}

// Prefill 5, decode 1, decode 1, prefill 3 on one slot (beside a second sequence on another slot)
// equals one 10-row prefill, bit for bit: the cache ends the same and every row sees the same
// positions with the same arithmetic.
TEST(AttentionInvariantTest, ChainedCallsEqualOneCallOverTheConcatenation) {
  AttentionCase c;
  c.hq = 4;
  c.hkv = 2;
  c.dh = 9;
  c.Randomize(11);
  const AttentionInputs all = MakeAttentionInputs(c, 10, 500);
  const AttentionResult whole =
      RunAttention(c, {{.lens = {10}, .slots = {2}, .cached = {0}, .inputs = all}}, Device::kCpu);
  ASSERT_TRUE(whole.status.ok()) << whole.status;
  std::vector<AttentionCall> chain;
  int64_t pos = 0;
  for (int32_t n : {5, 1, 1, 3}) {
    const int64_t qw = c.hq * c.dh, kw = c.hkv * c.dh;
    AttentionInputs in{Slice(all.q, pos, pos + n, qw), Slice(all.k, pos, pos + n, kw), Slice(all.v, pos, pos + n, kw)};
    const AttentionInputs other = MakeAttentionInputs(c, 1, 600 + static_cast<uint32_t>(pos));
    in.q.insert(in.q.begin(), other.q.begin(), other.q.end());  // a decode row of slot 0 first
    in.k.insert(in.k.begin(), other.k.begin(), other.k.end());
    in.v.insert(in.v.begin(), other.v.begin(), other.v.end());
    chain.push_back({.lens = {1, n}, .slots = {0, 2}, .cached = {static_cast<int32_t>(chain.size()),
                                                                  static_cast<int32_t>(pos)}, .inputs = in});
    pos += n;
  }
  const AttentionResult chained = RunAttention(c, chain, Device::kCpu);
  ASSERT_TRUE(chained.status.ok()) << chained.status;
  std::vector<float> slot2_rows;  // the chained outputs of slot 2's rows, in order
  const int64_t qw = c.hq * c.dh;
  int64_t row = 0;
  for (const AttentionCall& call : chain) {
    const std::vector<float> rows = Slice(chained.out, row + 1, row + 1 + call.lens[1], qw);
    slot2_rows.insert(slot2_rows.end(), rows.begin(), rows.end());
    row += 1 + call.lens[1];
  }
  EXPECT_TRUE(BitEqual(slot2_rows, whole.out));
  const int64_t slot_size = c.capacity * c.hkv * c.dh;
  EXPECT_TRUE(BitEqual(Slice(chained.k_cache, 2, 3, slot_size), Slice(whole.k_cache, 2, 3, slot_size)));
  EXPECT_TRUE(BitEqual(Slice(chained.v_cache, 2, 3, slot_size), Slice(whole.v_cache, 2, 3, slot_size)));
}

TEST(AttentionInvariantTest, ThreadCountDoesNotChangeTheResult) {
  AttentionCase c;
  c.hq = 4;
  c.hkv = 2;
  c.dh = 64;
  c.Randomize(12);
  const AttentionResult one = RunAttention(c, kCalls, Device::kCpu);
  cpu::ThreadPool pool(3);
  const AttentionResult three = RunAttention(c, kCalls, Device::kCpu, &pool);
  ASSERT_TRUE(one.status.ok() && three.status.ok());
  EXPECT_TRUE(BitEqual(one.out, three.out));
  EXPECT_TRUE(BitEqual(one.k_cache, three.k_cache));
}

// A valid call (T = 3 rows, Hq = 2, Hkv = 1, dh = 4, 2 slots of capacity 4) whose tensors a test
// case replaces one at a time; args point at the members.
struct Fixture {
  static Tensor F32(const Shape& s) { return *Tensor::Zeros(DType::kF32, s, Device::kCpu); }
  static Tensor I32(const std::vector<int32_t>& v) {
    return *Tensor::FromHostI32(v, {static_cast<int64_t>(v.size())}, Device::kCpu);
  }
  Tensor q = F32({3, 2, 4}), k = F32({3, 1, 4}), v = F32({3, 1, 4}), out = F32({3, 2, 4});
  Tensor k_cache = F32({2, 4, 1, 4}), v_cache = F32({2, 4, 1, 4});
  Tensor cu = I32({0, 2, 3}), slots = I32({0, 1}), cached = I32({1, 3});
  AttentionArgs args{.q = &q, .k = &k, .v = &v, .cached = &cached, .layout = {.cu_seqlens = &cu, .slot_ids = &slots},
                     .k_cache = &k_cache, .v_cache = &v_cache, .out = &out};
};

struct BadCase {
  const char* name;
  std::function<void(Fixture&)> mutate;
  const char* message;  // a substring of the error
};

TEST(AttentionValidationTest, EveryBadArgumentIsInvalidArgumentNamingIt) {
  {
    Fixture f;
    ASSERT_TRUE(Attention({}, f.args).ok());
  }
  auto read_only = [](const Shape& s) {
    auto buf = std::make_shared<std::vector<float>>(NumElements(s));
    return Tensor::WrapHost(buf->data(), DType::kF32, s, buf);
  };
  const std::vector<BadCase> cases = {
      {"null q", [](Fixture& f) { f.args.q = nullptr; }, "are required"},
      {"null cached", [](Fixture& f) { f.args.cached = nullptr; }, "are required"},
      {"null v_cache", [](Fixture& f) { f.args.v_cache = nullptr; }, "are required"},
      {"k on the emulator", [](Fixture& f) { f.k = *Tensor::Zeros(DType::kF32, {3, 1, 4}, Device::kCudaEmu); },
       "k F32[3, 1, 4] on cuda-emu, but the context is on cpu"},
      {"q rank 2", [](Fixture& f) { f.q = Fixture::F32({3, 8}); }, "want [T, Hq, dh]"},
      {"k_cache rank 3", [](Fixture& f) { f.k_cache = Fixture::F32({2, 4, 4}); }, "k_cache F32[2, 4, 4]"},
      {"dh 129", [](Fixture& f) { f.q = Fixture::F32({3, 2, 129}); }, "dh = 129 of q F32[3, 2, 129] on cpu outside [1, 128]"},
      {"dh 0", [](Fixture& f) { f.q = Fixture::F32({3, 2, 0}); }, "dh = 0"},
      {"Hq not a multiple of Hkv", [](Fixture& f) {
         f.q = Fixture::F32({3, 3, 4}), f.out = Fixture::F32({3, 3, 4});
         f.k = f.v = Fixture::F32({3, 2, 4});
       }, "Hq = 3 must be a positive multiple of the kv heads Hkv = 2"},
      {"q I32", [](Fixture& f) { f.q = *Tensor::Zeros(DType::kI32, {3, 2, 4}, Device::kCpu); }, "q I32[3, 2, 4]"},
      {"k rows", [](Fixture& f) { f.k = Fixture::F32({2, 1, 4}); }, "k F32[2, 1, 4] on cpu (want F32 [3, 1, 4]"},
      {"v dh", [](Fixture& f) { f.v = Fixture::F32({3, 1, 5}); }, "v F32[3, 1, 5]"},
      {"v heads", [](Fixture& f) { f.v = Fixture::F32({3, 2, 4}); }, "v F32[3, 2, 4]"},
      {"k_cache heads", [](Fixture& f) { f.k_cache = Fixture::F32({2, 4, 2, 4}); }, "k_cache F32[2, 4, 2, 4] on cpu (want F32 [2, 4, 1, 4]"},
      {"v_cache capacity", [](Fixture& f) { f.v_cache = Fixture::F32({2, 5, 1, 4}); }, "v_cache F32[2, 5, 1, 4]"},
      {"v_cache slots", [](Fixture& f) { f.v_cache = Fixture::F32({3, 4, 1, 4}); }, "v_cache F32[3, 4, 1, 4]"},
      {"out shape", [](Fixture& f) { f.out = Fixture::F32({3, 1, 4}); }, "out F32[3, 1, 4]"},
      {"scale NaN", [](Fixture& f) { f.args.scale = NAN; }, "scale nan must be finite and > 0"},
      {"scale 0", [](Fixture& f) { f.args.scale = 0.0f; }, "scale 0 must be finite and > 0"},
      {"scale negative", [](Fixture& f) { f.args.scale = -1.0f; }, "scale -1 must be finite"},
      {"scale inf", [](Fixture& f) { f.args.scale = INFINITY; }, "scale inf must be finite"},
      {"k_cache read-only", [&](Fixture& f) { f.k_cache = read_only({2, 4, 1, 4}); }, "k_cache is read-only"},
      {"v_cache read-only", [&](Fixture& f) { f.v_cache = read_only({2, 4, 1, 4}); }, "v_cache is read-only"},
      {"out read-only", [&](Fixture& f) { f.out = read_only({3, 2, 4}); }, "out is read-only"},
      {"caches shared", [](Fixture& f) { f.v_cache = f.k_cache; }, "k_cache and v_cache overlap"},
      {"out is q", [](Fixture& f) { f.out = f.q; }, "out overlaps q"},
      {"out in v_cache", [](Fixture& f) {
         f.v_cache = Fixture::F32({2, 6, 1, 4});
         f.k_cache = Fixture::F32({2, 6, 1, 4});
         f.out = *f.v_cache.Rows(1, 2).Reshape({3, 2, 4});
       }, "out overlaps v_cache"},
      {"k in k_cache", [](Fixture& f) {
         f.k_cache = Fixture::F32({2, 3, 1, 4});
         f.v_cache = Fixture::F32({2, 3, 1, 4});
         f.k = *f.k_cache.Rows(0, 1).Reshape({3, 1, 4});
         f.cached = Fixture::I32({0, 0});
       }, "k overlaps a cache"},
      {"null cu_seqlens", [](Fixture& f) { f.args.layout.cu_seqlens = nullptr; }, "needs cu_seqlens and slot_ids"},
      {"cu not covering T", [](Fixture& f) { f.cu = Fixture::I32({0, 2, 2}); }, "covers rows [0, 2) of 3"},
      {"cu decreasing", [](Fixture& f) { f.cu = Fixture::I32({0, 4, 3}); }, "cu_seqlens decreases"},
      {"slot outside the pool", [](Fixture& f) { f.slots = Fixture::I32({0, 2}); }, "slot 2 outside [0, 2)"},
      {"slot twice", [](Fixture& f) { f.slots = Fixture::I32({1, 1}); }, "slot 1 used twice"},
      {"cached length", [](Fixture& f) { f.cached = Fixture::I32({1, 1, 1}); }, "cached I32[3]"},
      {"cached F32", [](Fixture& f) { f.cached = Fixture::F32({2}); }, "cached F32[2]"},
      {"cached negative", [](Fixture& f) { f.cached = Fixture::I32({-1, 0}); }, "cached[0] = -1 is negative"},
      {"capacity overflow", [](Fixture& f) { f.cached = Fixture::I32({1, 4}); },
       "sequence 1 (slot 1) appends 1 rows to 4 cached positions, past the cache capacity 4"},
      {"capacity overflow of a prefill", [](Fixture& f) { f.cached = Fixture::I32({3, 0}); },
       "sequence 0 (slot 0) appends 2 rows to 3 cached positions, past the cache capacity 4"},
  };
  for (const BadCase& bad : cases) {
    Fixture f;
    bad.mutate(f);
    const absl::Status s = Attention({}, f.args);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad.name << ": " << s;
    EXPECT_NE(s.message().find(bad.message), std::string::npos) << bad.name << ": " << s;
    EXPECT_EQ(s.message().find("Attention: "), 0u) << bad.name << ": " << s;
  }
}

// Filling the cache exactly is fine; one row more is rejected.
TEST(AttentionValidationTest, OverflowByOneRowIsRejected) {
  AttentionCase c;
  c.Randomize(13);
  const AttentionResult r =
      RunAttention(c, {{.lens = {3, 1}, .slots = {0, 1}, .cached = {2, 12}, .seed = 1}}, Device::kCpu);
  EXPECT_EQ(r.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status.message().find("past the cache capacity 12"), std::string::npos) << r.status;
  const AttentionResult ok =
      RunAttention(c, {{.lens = {3, 1}, .slots = {0, 1}, .cached = {2, 11}, .seed = 1}}, Device::kCpu);
  EXPECT_TRUE(ok.status.ok()) << ok.status;
}

}  // namespace
}  // namespace mcserve::kernels
