// LinearMemory on the CUDA emulator against the CPU backend, for every rule (additive with and
// without key decay / normalize, gated delta with and without decay, SWLA, Titans): varlen batches
// mixing prefill chunks, decode rows and an empty sequence on scattered slots, chained calls through
// the slot state and aux, GQA/GVA head mappings, K and V not multiples of the block (V over one
// block), both emulator schedules bit-identical, device-side slot checks and validation on cuda-emu.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/emu/emu.h"
#include "kernels/linear_memory/linear_memory.h"
#include "random_inputs.h"
#include "emu_test_util.h"

namespace mcserve::kernels {
namespace {

struct Call {
  std::vector<int32_t> lens, slots;
  uint32_t seed;
};

struct MemCase {
  LinearMemoryRule rule = LinearMemoryRule::kAdditive;
  bool key_decay = false, decay = false, normalize = false;
  int64_t hq = 2, hk = 1, hv = 4, hs = 4, kd = 20, vd = 70, num_slots = 5;
  std::vector<float> state, aux;

  Shape AuxShape() const {
    if (rule == LinearMemoryRule::kSwla) return {num_slots, hs, kd + vd};
    if (rule == LinearMemoryRule::kTitans) return {num_slots, hs, kd, vd};
    if (normalize) return {num_slots, hs, kd};
    return {};
  }
  void Randomize(uint32_t seed) {
    state = RandomVector(num_slots * hs * kd * vd, seed, -0.5f, 0.5f);
    const Shape aux_shape = AuxShape();
    if (!aux_shape.empty()) {
      aux = normalize ? RandomVector(NumElements(aux_shape), seed + 1, 0.5f, 2.0f)  // z > 0
                      : RandomVector(NumElements(aux_shape), seed + 1, -0.5f, 0.5f);
    }
  }
};

struct MemResult {
  absl::Status status;
  std::vector<float> out, state, aux;
};

// Rows of k scaled to unit L2 norm (keeps the delta and Titans recurrences bounded).
void NormalizeRows(std::vector<float>& x, int64_t dim) {
  for (size_t r = 0; r + dim <= x.size(); r += dim) {
    double n = 0;
    for (int64_t i = 0; i < dim; ++i) n += double(x[r + i]) * x[r + i];
    const float inv = static_cast<float>(1.0 / std::sqrt(n + 1e-12));
    for (int64_t i = 0; i < dim; ++i) x[r + i] *= inv;
  }
}

// Runs the calls in order through one state/aux pool on `dev`; concatenated outputs, final state/aux.
MemResult RunMemory(const MemCase& c, const std::vector<Call>& calls, Device dev) {
  const bool additive = c.rule == LinearMemoryRule::kAdditive;
  Tensor state = *Tensor::FromHost(c.state, {c.num_slots, c.hs, c.kd, c.vd}, dev);
  const Shape aux_shape = c.AuxShape();
  Tensor aux;
  if (!aux_shape.empty()) aux = *Tensor::FromHost(c.aux, aux_shape, dev);
  const Context ctx{.device = dev};
  MemResult r;
  for (const Call& call : calls) {
    std::vector<int32_t> cu = {0};
    for (int32_t n : call.lens) cu.push_back(cu.back() + n);
    const int64_t t = cu.back(), nb = static_cast<int64_t>(call.lens.size());
    const uint32_t s = call.seed;
    // Additive memories take feature-mapped (positive) q, k; the others signed, unit-norm keys.
    std::vector<float> q = RandomVector(t * c.hq * c.kd, s, additive ? 0.0f : -1.0f, 1.0f);
    std::vector<float> k = RandomVector(t * c.hk * c.kd, s + 1, additive ? 0.0f : -1.0f, 1.0f);
    if (!additive) NormalizeRows(k, c.kd);
    Tensor qt = *Tensor::FromHost(q, {t, c.hq, c.kd}, dev);
    Tensor kt = *Tensor::FromHost(k, {t, c.hk, c.kd}, dev);
    Tensor vt = *Tensor::FromHost(RandomVector(t * c.hv * c.vd, s + 2), {t, c.hv, c.vd}, dev);
    Tensor kdec = *Tensor::FromHost(RandomVector(t * c.hk * c.kd, s + 3, 0.7f, 1.0f), {t, c.hk, c.kd}, dev);
    Tensor dec = *Tensor::FromHost(RandomVector(t * c.hs, s + 4, 0.8f, 1.0f), {t, c.hs}, dev);
    Tensor beta = *Tensor::FromHost(RandomVector(t * c.hs, s + 5, 0.05f, 0.9f), {t, c.hs}, dev);
    Tensor gamma = *Tensor::FromHost(RandomVector(t * c.hs, s + 6, 0.3f, 0.9f), {t, c.hs}, dev);
    Tensor out = *Tensor::Zeros(DType::kF32, {t, c.hs, c.vd}, dev);
    Tensor cu_t = *Tensor::FromHostI32(cu, {nb + 1}, dev);
    Tensor slot_t = *Tensor::FromHostI32(call.slots, {nb}, dev);
    const bool gated = c.rule == LinearMemoryRule::kSwla || c.rule == LinearMemoryRule::kTitans;
    LinearMemoryArgs a{.rule = c.rule,
                       .q = &qt,
                       .k = &kt,
                       .v = &vt,
                       .key_decay = c.key_decay ? &kdec : nullptr,
                       .decay = c.decay || gated ? &dec : nullptr,
                       .beta = additive ? nullptr : &beta,
                       .gamma = gated ? &gamma : nullptr,
                       .normalize = c.normalize,
                       .layout = {.cu_seqlens = &cu_t, .slot_ids = &slot_t},
                       .state = &state,
                       .aux = aux_shape.empty() ? nullptr : &aux,
                       .out = &out};
    r.status = LinearMemory(ctx, a);
    if (!r.status.ok()) return r;
    const std::vector<float> o = *out.ToHostF32();
    r.out.insert(r.out.end(), o.begin(), o.end());
  }
  r.state = *state.ToHostF32();
  if (!aux_shape.empty()) r.aux = *aux.ToHostF32();
  return r;
}

bool BitEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Prefill chunks, decode rows and an empty sequence; then decode on the same slots; then a chunk
// on a fresh slot.
const std::vector<Call> kCalls = {
    {.lens = {5, 1, 0, 3}, .slots = {3, 0, 4, 1}, .seed = 100},
    {.lens = {1, 1, 1}, .slots = {0, 3, 1}, .seed = 200},
    {.lens = {6}, .slots = {2}, .seed = 300},
};

// Every output is the CPU's per-column arithmetic; only FMA contraction may differ.
constexpr float kTol = 2e-5f;

void CheckCase(const MemCase& c) {
  const MemResult cpu = RunMemory(c, kCalls, Device::kCpu);
  ASSERT_TRUE(cpu.status.ok()) << cpu.status;
  const std::array<MemResult, 2> emu = RunSchedules([&] { return RunMemory(c, kCalls, DeviceUnderTest()); });
  for (const MemResult& r : emu) ASSERT_TRUE(r.status.ok()) << r.status;
  ExpectNear(emu[0].out, cpu.out, kTol, "out");
  ExpectNear(emu[0].state, cpu.state, kTol, "state");
  ExpectNear(emu[0].aux, cpu.aux, kTol, "aux");
  EXPECT_TRUE(BitEqual(emu[0].out, emu[1].out));
  EXPECT_TRUE(BitEqual(emu[0].state, emu[1].state));
  EXPECT_TRUE(BitEqual(emu[0].aux, emu[1].aux));
  EXPECT_NE(cpu.state, c.state);  // the calls did update the pool
}

TEST(LinearMemoryEmuTest, AdditivePlain) {
  MemCase c;
  c.Randomize(1);
  CheckCase(c);
}

TEST(LinearMemoryEmuTest, AdditiveKeyDecayNormalizeGqa) {
  MemCase c;
  c.key_decay = c.normalize = true;
  c.hq = 1;
  c.hk = 2;
  c.hv = 2;
  c.hs = 2;
  c.kd = 40;  // one K template up, not a multiple of the block
  c.vd = 24;
  c.Randomize(2);
  CheckCase(c);
}

TEST(LinearMemoryEmuTest, GatedDeltaWithAndWithoutDecay) {
  MemCase c;
  c.rule = LinearMemoryRule::kGatedDelta;
  c.decay = true;
  c.Randomize(3);
  CheckCase(c);
  c.decay = false;
  c.hq = c.hk = c.hv = c.hs = 2;
  c.kd = 32;
  c.vd = 33;
  c.Randomize(4);
  CheckCase(c);
  // K = 64: the kernel whose state column lives in registers (K a compile-time constant).
  c.decay = true;
  c.kd = 64;
  c.vd = 70;  // two column blocks, the second partly idle
  c.Randomize(10);
  CheckCase(c);
}

TEST(LinearMemoryEmuTest, Swla) {
  MemCase c;
  c.rule = LinearMemoryRule::kSwla;
  c.hq = 4;
  c.hv = 2;
  c.Randomize(5);
  CheckCase(c);
}

TEST(LinearMemoryEmuTest, Titans) {
  MemCase c;
  c.rule = LinearMemoryRule::kTitans;
  c.hk = 4;
  c.hq = 4;
  c.kd = 17;
  c.vd = 65;
  c.Randomize(6);
  CheckCase(c);
}

// A slot id outside the pool (only checked on the device): NaN outputs, pool untouched.
TEST(LinearMemoryEmuTest, OutOfRangeSlotOnDeviceWritesNanAndKeepsState) {
  for (LinearMemoryRule rule : {LinearMemoryRule::kSwla, LinearMemoryRule::kAdditive, LinearMemoryRule::kGatedDelta}) {
    MemCase c;
    c.rule = rule;
    c.normalize = rule == LinearMemoryRule::kAdditive;
    c.decay = rule == LinearMemoryRule::kGatedDelta;
    if (rule == LinearMemoryRule::kGatedDelta) c.kd = 64;  // the register kernel's own NaN path
    c.vd = 8;
    c.Randomize(7);
    const std::vector<Call> calls = {{.lens = {2}, .slots = {5}, .seed = 9}};
    const MemResult r = RunMemory(c, calls, DeviceUnderTest());
    ASSERT_TRUE(r.status.ok()) << r.status;
    EXPECT_EQ(r.state, c.state);
    EXPECT_EQ(r.aux, c.aux);
    for (float o : r.out) EXPECT_TRUE(std::isnan(o));
  }
}

TEST(LinearMemoryEmuTest, InvalidInputFailsOnCudaEmu) {
  MemCase c;
  c.rule = LinearMemoryRule::kGatedDelta;
  c.vd = 8;
  c.Randomize(8);
  const Device dev = DeviceUnderTest();
  const Context ctx{.device = dev};
  Tensor q = *Tensor::Zeros(DType::kF32, {2, 2, c.kd}, dev);
  Tensor k = *Tensor::Zeros(DType::kF32, {2, 1, c.kd}, dev);
  Tensor v = *Tensor::Zeros(DType::kF32, {2, 4, c.vd}, dev);
  Tensor gate = *Tensor::Zeros(DType::kF32, {2, 4}, dev);
  Tensor state = *Tensor::Zeros(DType::kF32, {3, 4, c.kd, c.vd}, dev);
  Tensor out = *Tensor::Zeros(DType::kF32, {2, 4, c.vd}, dev);
  Tensor cu = *Tensor::FromHostI32(std::vector<int32_t>{0, 2}, {2}, dev);
  Tensor slots = *Tensor::FromHostI32(std::vector<int32_t>{1}, {1}, dev);
  LinearMemoryArgs a{.rule = LinearMemoryRule::kGatedDelta, .q = &q, .k = &k, .v = &v, .beta = &gate,
                     .layout = {.cu_seqlens = &cu, .slot_ids = &slots}, .state = &state, .out = &out};
  EXPECT_TRUE(LinearMemory(ctx, a).ok());
  LinearMemoryArgs b = a;
  b.beta = nullptr;  // required by gated delta
  EXPECT_EQ(LinearMemory(ctx, b).code(), absl::StatusCode::kInvalidArgument);
  b = a;
  b.aux = &state;  // not used by gated delta
  EXPECT_EQ(LinearMemory(ctx, b).code(), absl::StatusCode::kInvalidArgument);
  Tensor cpu_q = *Tensor::Zeros(DType::kF32, {2, 2, c.kd}, Device::kCpu);
  b = a;
  b.q = &cpu_q;
  EXPECT_EQ(LinearMemory(ctx, b).code(), absl::StatusCode::kInvalidArgument);
  // K beyond the kernel's thread-local columns: a clear Unimplemented, not a wrong answer.
  Tensor q_big = *Tensor::Zeros(DType::kF32, {2, 2, 300}, dev);
  Tensor k_big = *Tensor::Zeros(DType::kF32, {2, 1, 300}, dev);
  Tensor state_big = *Tensor::Zeros(DType::kF32, {3, 4, 300, c.vd}, dev);
  b = a;
  b.q = &q_big;
  b.k = &k_big;
  b.state = &state_big;
  EXPECT_EQ(LinearMemory(ctx, b).code(), absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace mcserve::kernels
