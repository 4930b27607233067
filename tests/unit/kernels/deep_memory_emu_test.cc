// DeepMemory and DeepMemoryAccumulate on the CUDA emulator against the CPU backend: DLA and Titans,
// with and without the layer norm, b = 1 and b = 3 (a stored anchor used by partial inner chunks),
// varlen batches mixing prefill chunks, decode rows and an empty sequence on scattered slots, chained
// calls through the slot states, d and e off the warp size, a d = 64 head (the 256-thread block, 128 KB
// of weights per head), both emulator schedules bit-identical, the device-side checks of slots and
// inner offsets (NaN outputs, no state writes), and validation on cuda-emu.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "emu_test_util.h"
#include "gtest/gtest.h"
#include "kernels/deep_memory/deep_memory.h"
#include "random_inputs.h"

namespace mcserve::kernels {
namespace {

using Rule = DeepMemoryRule;

struct Call {
  std::vector<int32_t> lens, slots, offsets;
  uint32_t seed;
};

struct MemCase {
  std::string name;
  Rule rule = Rule::kDla;
  bool ln = false;
  int chunk = 1;
  int64_t heads = 2, d = 12, x = 4, num_slots = 5;
  std::vector<float> memory, momentum, anchor, ln_w, ln_b;
  int64_t e() const { return x * d; }
  int64_t p() const { return 2 * e() * d; }
  bool titans() const { return rule == Rule::kTitans; }

  void Randomize(uint32_t seed) {
    const int64_t n = num_slots * heads * p();
    memory = RandomVector(n, seed);
    for (int64_t i = 0; i < n; ++i) memory[i] /= static_cast<float>(std::sqrt(double(i % p() < e() * d ? d : e())));
    momentum = titans() ? RandomVector(n, seed + 1, -0.01f, 0.01f) : std::vector<float>();
    anchor = chunk > 1 ? RandomVector(n, seed + 2, -0.2f, 0.2f) : std::vector<float>();
    if (ln) {
      ln_w = RandomVector(heads * d, seed + 3, 0.5f, 1.5f);
      ln_b = RandomVector(heads * d, seed + 4, -0.2f, 0.2f);
    }
  }
};

struct MemResult {
  absl::Status status;
  std::vector<float> out, memory, momentum, anchor;
};

void NormalizeRows(std::vector<float>& x, int64_t dim) {
  for (size_t r = 0; r + dim <= x.size(); r += dim) {
    double n = 0;
    for (int64_t i = 0; i < dim; ++i) n += double(x[r + i]) * x[r + i];
    for (int64_t i = 0; i < dim; ++i) x[r + i] = static_cast<float>(x[r + i] / std::sqrt(n + 1e-12));
  }
}

// Runs the calls in order through one state pool on `dev`; concatenated outputs, final states.
MemResult RunMemory(const MemCase& c, const std::vector<Call>& calls, Device dev) {
  const Shape state_shape = {c.num_slots, c.heads, c.p()};
  Tensor memory = *Tensor::FromHost(c.memory, state_shape, dev);
  Tensor momentum = c.titans() ? *Tensor::FromHost(c.momentum, state_shape, dev) : Tensor();
  Tensor anchor = c.chunk > 1 ? *Tensor::FromHost(c.anchor, state_shape, dev) : Tensor();
  Tensor ln_w = c.ln ? *Tensor::FromHost(c.ln_w, {c.heads, c.d}, dev) : Tensor();
  Tensor ln_b = c.ln ? *Tensor::FromHost(c.ln_b, {c.heads, c.d}, dev) : Tensor();
  MemResult r;
  for (const Call& call : calls) {
    std::vector<int32_t> cu = {0};
    for (int32_t n : call.lens) cu.push_back(cu.back() + n);
    const int64_t t = cu.back(), h = c.heads, d = c.d, nb = static_cast<int64_t>(call.lens.size());
    const uint32_t s = call.seed;
    std::vector<float> q = RandomVector(t * h * d, s), k = RandomVector(t * h * d, s + 1);
    NormalizeRows(q, d);
    NormalizeRows(k, d);
    const float max_step = (c.titans() ? 0.3f : 0.2f) * (c.ln ? 0.1f : 1.0f);
    Tensor qt = *Tensor::FromHost(q, {t, h, d}, dev), kt = *Tensor::FromHost(k, {t, h, d}, dev);
    Tensor vt = *Tensor::FromHost(RandomVector(t * h * d, s + 2), {t, h, d}, dev);
    Tensor step = *Tensor::FromHost(RandomVector(t * h, s + 3, 0.2f * max_step, max_step), {t, h}, dev);
    Tensor alpha = *Tensor::FromHost(RandomVector(t * h, s + 4, 0.9f, 1.0f), {t, h}, dev);
    Tensor beta = *Tensor::FromHost(RandomVector(t * h, s + 5, 0.5f, 0.9f), {t, h}, dev);
    Tensor cut = *Tensor::FromHostI32(cu, {nb + 1}, dev), slt = *Tensor::FromHostI32(call.slots, {nb}, dev);
    Tensor off = *Tensor::FromHostI32(call.offsets, {nb}, dev);
    Tensor out = *Tensor::Zeros(DType::kF32, {t, h, d}, dev);
    DeepMemoryArgs a;
    a.rule = c.rule;
    a.expansion = static_cast<int>(c.x);
    a.inner_chunk_size = c.chunk;
    a.q = &qt;
    a.k = &kt;
    a.v = &vt;
    a.step = &step;
    if (c.titans()) {
      a.retention = &alpha;
      a.momentum_gate = &beta;
      a.momentum = &momentum;
    }
    if (c.ln) {
      a.ln_weight = &ln_w;
      a.ln_bias = &ln_b;
    }
    if (c.chunk > 1) {
      a.inner_offset = &off;
      a.anchor = &anchor;
    }
    a.layout = {&cut, &slt};
    a.memory = &memory;
    a.out = &out;
    r.status = DeepMemory(Context{.device = dev}, a);
    if (!r.status.ok()) return r;
    const std::vector<float> o = *out.ToHostF32();
    r.out.insert(r.out.end(), o.begin(), o.end());
  }
  r.memory = *memory.ToHostF32();
  if (c.titans()) r.momentum = *momentum.ToHostF32();
  if (c.chunk > 1) r.anchor = *anchor.ToHostF32();
  return r;
}

// Dot products sum in another order on the device (lanes, then a butterfly): results agree to fp32
// rounding, carried through the recurrence.
constexpr float kTol = 2e-5f;

// The calls on the CPU and on the device under test (both schedules); compares everything.
void CheckAgainstCpu(const MemCase& c, const std::vector<Call>& calls) {
  SCOPED_TRACE(c.name);
  const MemResult cpu = RunMemory(c, calls, Device::kCpu);
  ASSERT_TRUE(cpu.status.ok()) << cpu.status;
  auto [fwd, rev] = RunSchedules([&] { return RunMemory(c, calls, DeviceUnderTest()); });
  ASSERT_TRUE(fwd.status.ok()) << fwd.status;
  ASSERT_TRUE(rev.status.ok()) << rev.status;
  EXPECT_EQ(fwd.out, rev.out) << "schedules differ";
  EXPECT_EQ(fwd.memory, rev.memory) << "schedules differ";
  ExpectNear(fwd.out, cpu.out, kTol, "out");
  ExpectNear(fwd.memory, cpu.memory, kTol, "memory");
  ExpectNear(fwd.momentum, cpu.momentum, kTol, "momentum");
  ExpectNear(fwd.anchor, cpu.anchor, kTol, "anchor");
}

std::vector<MemCase> SmallCases() {
  std::vector<MemCase> cs;
  for (Rule rule : {Rule::kDla, Rule::kTitans}) {
    for (bool ln : {false, true}) {
      for (int chunk : {1, 3}) {
        MemCase c;
        c.name = std::string(rule == Rule::kDla ? "dla" : "titans") + (ln ? "_ln" : "") + "_b" + std::to_string(chunk);
        c.rule = rule;
        c.ln = ln;
        c.chunk = chunk;
        c.Randomize(static_cast<uint32_t>(cs.size()) * 10 + 1);
        cs.push_back(c);
      }
    }
  }
  return cs;
}

TEST(DeepMemoryEmuTest, EveryRuleMatchesCpu) {
  for (const MemCase& c : SmallCases()) {
    const bool chunked = c.chunk > 1;
    // A prefill chunk, a decode row, an empty sequence and a second chunk on scattered slots; then
    // decode rows continuing them (inner offsets advanced by the first call's lengths).
    const std::vector<Call> calls = {
        {{6, 1, 0, 7}, {3, 0, 1, 4}, chunked ? std::vector<int32_t>{0, 2, 1, 1} : std::vector<int32_t>{0, 0, 0, 0}, 7},
        {{1, 1, 1}, {3, 0, 4}, chunked ? std::vector<int32_t>{0, 0, 2} : std::vector<int32_t>{0, 0, 0}, 8}};
    CheckAgainstCpu(c, calls);
  }
}

TEST(DeepMemoryEmuTest, LargeHeadMatchesCpu) {
  MemCase c;
  c.name = "titans_ln_b2_d64";
  c.rule = Rule::kTitans;
  c.ln = true;
  c.chunk = 2;
  c.heads = 1;
  c.d = 64;
  c.num_slots = 2;
  c.Randomize(91);
  CheckAgainstCpu(c, {{{3}, {1}, {1}, 92}});
  MemCase dla = c;
  dla.name = "dla_b1_d40_x3";  // e = 120: a partial last warp of rows
  dla.rule = Rule::kDla;
  dla.ln = false;
  dla.chunk = 1;
  dla.d = 40;
  dla.x = 3;
  dla.Randomize(93);
  CheckAgainstCpu(dla, {{{2}, {0}, {0}, 94}});
}

// Device-side layout values are not read back by the validation: a slot or inner offset out of range
// gives NaN outputs for that sequence and leaves every state untouched; the other sequences run.
TEST(DeepMemoryEmuTest, BadSlotOrOffsetGivesNaN) {
  MemCase c;
  c.name = "bad";
  c.rule = Rule::kTitans;
  c.chunk = 3;
  c.Randomize(101);
  const std::vector<Call> good = {{{2, 3}, {1, 2}, {0, 2}, 102}};
  const MemResult ok = RunMemory(c, good, DeviceUnderTest());
  ASSERT_TRUE(ok.status.ok()) << ok.status;
  for (const Call& call : {Call{{2, 3}, {7, 2}, {0, 2}, 102}, Call{{2, 3}, {1, 2}, {3, 2}, 102}}) {
    const MemResult r = RunMemory(c, {call}, DeviceUnderTest());
    ASSERT_TRUE(r.status.ok()) << r.status;
    const int64_t row = c.heads * c.d;
    for (int64_t i = 0; i < 2 * row; ++i) EXPECT_TRUE(std::isnan(r.out[i])) << i;
    for (int64_t i = 2 * row; i < 5 * row; ++i) EXPECT_EQ(r.out[i], ok.out[i]) << i;
    const int64_t slot = c.heads * c.p();
    for (int64_t i = 0; i < c.num_slots * slot; ++i) {
      const bool second = i / slot == 2;
      if (second) continue;
      ASSERT_EQ(r.memory[i], c.memory[i]) << i;
      ASSERT_EQ(r.momentum[i], c.momentum[i]) << i;
      ASSERT_EQ(r.anchor[i], c.anchor[i]) << i;
    }
  }
}

TEST(DeepMemoryEmuTest, AccumulateMatchesCpu) {
  const int64_t slots = 5, h = 2, p = 700;
  const std::vector<float> memory = RandomVector(slots * h * p, 111), sum0 = RandomVector(slots * h * p, 112);
  const std::vector<int32_t> ids = {4, 1, 2};
  auto run = [&](Device dev, const std::vector<int32_t>& slot_ids) {
    Tensor mem = *Tensor::FromHost(memory, {slots, h, p}, dev), sum = *Tensor::FromHost(sum0, {slots, h, p}, dev);
    Tensor idt = *Tensor::FromHostI32(slot_ids, {static_cast<int64_t>(slot_ids.size())}, dev);
    const absl::Status s = DeepMemoryAccumulate(Context{.device = dev}, {.memory = &mem, .slot_ids = &idt, .sum = &sum});
    EXPECT_TRUE(s.ok()) << s;
    return *sum.ToHostF32();
  };
  const std::vector<float> cpu = run(Device::kCpu, ids);
  EXPECT_EQ(RunBothSchedules([&] { return run(DeviceUnderTest(), ids); }), cpu);
  // A device-side slot out of range is skipped.
  EXPECT_EQ(run(DeviceUnderTest(), {4, 9, 1, 2, -1}), cpu);
}

TEST(DeepMemoryEmuTest, RejectsBadInputOnCudaEmu) {
  const Device dev = DeviceUnderTest();
  const int64_t t = 2, h = 1, d = 4, p = 2 * 4 * d * d;
  auto zeros = [&](Shape s, Device where) { return *Tensor::Zeros(DType::kF32, std::move(s), where); };
  Tensor q = zeros({t, h, d}, dev), k = zeros({t, h, d}, dev), v = zeros({t, h, d}, dev), step = zeros({t, h}, dev);
  Tensor memory = zeros({1, h, p}, dev), out = zeros({t, h, d}, dev), v_host = zeros({t, h, d}, Device::kCpu);
  const int32_t cu[2] = {0, 2}, slot = 0;
  Tensor cut = *Tensor::FromHostI32(cu, {2}, dev), slt = *Tensor::FromHostI32({&slot, 1}, {1}, dev);
  DeepMemoryArgs a;
  a.q = &q;
  a.k = &k;
  a.v = &v;
  a.step = &step;
  a.layout = {&cut, &slt};
  a.memory = &memory;
  a.out = &out;
  ASSERT_TRUE(DeepMemory(Context{.device = dev}, a).ok());
  a.v = &v_host;  // left on the CPU
  absl::Status s = DeepMemory(Context{.device = dev}, a);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("v "), std::string::npos) << s;
  a.v = &v;
  a.inner_chunk_size = 2;  // needs an anchor and inner_offset
  s = DeepMemory(Context{.device = dev}, a);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
}

}  // namespace
}  // namespace mcserve::kernels
