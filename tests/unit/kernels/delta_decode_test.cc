// DeltaDecode against the ops it fuses, run one after the other as the engine runs them without it:
// Activation (β's sigmoid), Gate (the decay), ShortConv on q, k and v, L2Norm on q and k, then
// LinearMemory (kGatedDelta). Over three decode steps (the conv windows and memories carried), the
// outputs, the normalised rows, β, the decay, the memories and the conv windows are equal bit for bit:
// one and three sequences in scattered slots, with and without the decay and β's projection, the
// vector and the generic gated delta step, on one thread and on a pool. Then the arguments it refuses.
#include "kernels/delta_decode/delta_decode.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/gate/gate.h"
#include "kernels/l2_norm/l2_norm.h"
#include "kernels/linear_memory/gated_delta_dispatch.h"

namespace mcserve::kernels {
namespace {

struct Case {
  int64_t seqs, heads, k, v;
  bool decay, beta_logits;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.seqs << " sequences, " << c.heads << " heads, K " << c.k << ", V " << c.v << (c.decay ? ", decay" : "")
      << (c.beta_logits ? ", beta from b_proj" : ", beta constant");
}

constexpr int kWidth = 4;
constexpr int64_t kSlots = 5;
constexpr float kBetaScale = 2.0f;

std::vector<float> Random(int64_t n, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> x(n);
  for (float& e : x) e = d(rng);
  return x;
}

Tensor F32(const std::vector<float>& v, Shape shape) { return *Tensor::FromHost(v, std::move(shape), Device::kCpu); }

std::vector<float> Host(const Tensor& t) { return *t.ToHostF32(); }

// [D, 1, W] weights transposed to [W, D].
Tensor Transposed(const std::vector<float>& w, int64_t d) {
  std::vector<float> taps(w.size());
  for (int64_t c = 0; c < d; ++c) {
    for (int j = 0; j < kWidth; ++j) taps[j * d + c] = w[c * kWidth + j];
  }
  return F32(taps, {kWidth, d});
}

// One layer's weights and state, and the step inputs, from one seed; `Step` runs a decode step either way.
struct Layer {
  Case c;
  int64_t d[3];  // q, k, v channels
  Tensor weight[3], taps[3], window[3], memory, a_log, dt_bias, cu, slots;

  explicit Layer(const Case& cs) : c(cs), d{cs.heads * cs.k, cs.heads * cs.k, cs.heads * cs.v} {
    std::mt19937 rng(29);
    for (int i = 0; i < 3; ++i) {
      const std::vector<float> w = Random(d[i] * kWidth, rng, -0.6f, 0.6f);
      weight[i] = F32(w, {d[i], 1, kWidth});
      taps[i] = Transposed(w, d[i]);
      window[i] = F32(Random(kSlots * (kWidth - 1) * d[i], rng, -1.0f, 1.0f), {kSlots, kWidth - 1, d[i]});
    }
    memory = F32(Random(kSlots * c.heads * c.k * c.v, rng, -0.5f, 0.5f), {kSlots, c.heads, c.k, c.v});
    a_log = F32(Random(c.heads, rng, -1.0f, 1.0f), {c.heads});
    dt_bias = F32(Random(c.heads, rng, -1.0f, 1.0f), {c.heads});
    std::vector<int32_t> cu_host, slot_host = {3, 0, 4};
    for (int32_t b = 0; b <= c.seqs; ++b) cu_host.push_back(b);
    slot_host.resize(c.seqs);
    cu = *Tensor::FromHostI32(cu_host, {c.seqs + 1}, Device::kCpu);
    slots = *Tensor::FromHostI32(slot_host, {c.seqs}, Device::kCpu);
  }
  BatchLayout layout() const { return {.cu_seqlens = &cu, .slot_ids = &slots}; }
};

// One step's inputs (the projected rows) and what it leaves (everything it writes).
struct StepInputs {
  Tensor x[3], b, a;  // [B, D_i], [B, H], [B, H]
};
struct StepResult {
  std::vector<float> out, rows[3], beta, decay;
};

StepInputs Inputs(const Layer& l, int step) {
  std::mt19937 rng(101 + step);
  StepInputs in;
  for (int i = 0; i < 3; ++i) in.x[i] = F32(Random(l.c.seqs * l.d[i], rng, -2.0f, 2.0f), {l.c.seqs, l.d[i]});
  in.b = F32(Random(l.c.seqs * l.c.heads, rng, -3.0f, 3.0f), {l.c.seqs, l.c.heads});
  in.a = F32(Random(l.c.seqs * l.c.heads, rng, -3.0f, 3.0f), {l.c.seqs, l.c.heads});
  return in;
}

Tensor Zeros(Shape shape) { return *Tensor::Zeros(DType::kF32, std::move(shape), Device::kCpu); }

// The engine's op-by-op decode step.
StepResult OpByOp(Layer& l, const StepInputs& in, cpu::ThreadPool* pool) {
  const Context ctx{.device = Device::kCpu, .pool = pool};
  const int64_t b = l.c.seqs, h = l.c.heads;
  Tensor beta = Zeros({b, h});
  if (l.c.beta_logits) {
    EXPECT_TRUE(Activation(ctx, {.kind = ActivationKind::kSigmoid, .x = &in.b, .scale = kBetaScale, .out = &beta}).ok());
  } else {
    EXPECT_TRUE(beta.CopyFromHost(std::vector<float>(b * h, kBetaScale)).ok());
  }
  Tensor decay = Zeros({b, h});
  if (l.c.decay) {
    EXPECT_TRUE(Gate(ctx, {.kind = GateKind::kSoftplusDecay, .x = &in.a, .a_log = &l.a_log, .dt_bias = &l.dt_bias,
                           .out = &decay})
                    .ok());
  }
  Tensor rows[3];
  for (int i = 0; i < 3; ++i) {
    rows[i] = Zeros({b, l.d[i]});
    const absl::Status s = ShortConv(ctx, {.x = &in.x[i], .weight = &l.weight[i], .silu = true, .layout = l.layout(),
                                           .state = &l.window[i], .out = &rows[i]});
    EXPECT_TRUE(s.ok()) << s;
  }
  Tensor qn = *rows[0].Reshape({b * h, l.c.k}), kn = *rows[1].Reshape({b * h, l.c.k});
  EXPECT_TRUE(L2Norm(ctx, {.kind = RowNormKind::kL2, .x = &qn, .eps = 1e-6f, .scale = 0.25f, .out = &qn}).ok());
  EXPECT_TRUE(L2Norm(ctx, {.kind = RowNormKind::kL2, .x = &kn, .eps = 1e-6f, .scale = 1.0f, .out = &kn}).ok());
  Tensor q = *rows[0].Reshape({b, h, l.c.k}), k = *rows[1].Reshape({b, h, l.c.k}), v = *rows[2].Reshape({b, h, l.c.v});
  Tensor out = Zeros({b, h, l.c.v});
  const absl::Status s = LinearMemory(ctx, {.rule = LinearMemoryRule::kGatedDelta, .q = &q, .k = &k, .v = &v,
                                            .decay = l.c.decay ? &decay : nullptr, .beta = &beta, .layout = l.layout(),
                                            .state = &l.memory, .out = &out});
  EXPECT_TRUE(s.ok()) << s;
  return {Host(out), {Host(rows[0]), Host(rows[1]), Host(rows[2])}, Host(beta), l.c.decay ? Host(decay) : std::vector<float>{}};
}

// DeltaDecode's arguments for `in` over the tensors given (which must outlive the call).
struct Fused {
  Tensor rows[3], q, k, v, beta, decay, out;
  DeltaDecodeArgs args;

  Fused(Layer& l, const StepInputs& in) {
    const int64_t b = l.c.seqs, h = l.c.heads;
    for (int i = 0; i < 3; ++i) {
      rows[i] = Zeros({b, l.d[i]});
      args.conv[i] = {.x = &in.x[i], .weight = &l.weight[i], .silu = true, .layout = l.layout(), .state = &l.window[i],
                      .out = &rows[i]};
      args.taps[i] = &l.taps[i];
    }
    q = *rows[0].Reshape({b, h, l.c.k});
    k = *rows[1].Reshape({b, h, l.c.k});
    v = *rows[2].Reshape({b, h, l.c.v});
    beta = Zeros({b, h});
    decay = Zeros({b, h});
    out = Zeros({b, h, l.c.v});
    args.q_scale = 0.25f;
    args.beta_logits = l.c.beta_logits ? &in.b : nullptr;
    args.beta_scale = kBetaScale;
    if (l.c.decay) {
      args.decay_logits = &in.a;
      args.a_log = &l.a_log;
      args.dt_bias = &l.dt_bias;
      args.decay = &decay;
    }
    args.beta = &beta;
    args.memory = {.rule = LinearMemoryRule::kGatedDelta, .q = &q, .k = &k, .v = &v,
                   .decay = l.c.decay ? &decay : nullptr, .beta = &beta, .layout = l.layout(), .state = &l.memory,
                   .out = &out};
  }
  StepResult Result(const Layer& l) const {
    return {Host(out), {Host(rows[0]), Host(rows[1]), Host(rows[2])}, Host(beta),
            l.c.decay ? Host(decay) : std::vector<float>{}};
  }
};

StepResult RunFused(Layer& l, const StepInputs& in, cpu::ThreadPool* pool) {
  Fused f(l, in);
  const absl::Status s = DeltaDecode({.device = Device::kCpu, .pool = pool}, f.args);
  EXPECT_TRUE(s.ok()) << s;
  return f.Result(l);
}

void ExpectBitEqual(const std::vector<float>& a, const std::vector<float>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(std::memcmp(&a[i], &b[i], sizeof(float)), 0) << what << "[" << i << "]: " << a[i] << " vs " << b[i];
  }
}

class DeltaDecodeTest : public ::testing::TestWithParam<Case> {
 protected:
  // Three steps each way from the same layer, compared after every step.
  void ExpectSameAsOpByOp(cpu::ThreadPool* pool) {
    Layer ops(GetParam()), fused(GetParam());
    for (int step = 0; step < 3; ++step) {
      const StepInputs in = Inputs(ops, step);
      const StepResult a = OpByOp(ops, in, pool), b = RunFused(fused, in, pool);
      const std::string at = " at step " + std::to_string(step);
      ExpectBitEqual(a.out, b.out, "out" + at);
      for (int i = 0; i < 3; ++i) ExpectBitEqual(a.rows[i], b.rows[i], "rows[" + std::to_string(i) + "]" + at);
      ExpectBitEqual(a.beta, b.beta, "beta" + at);
      ExpectBitEqual(a.decay, b.decay, "decay" + at);
      ExpectBitEqual(Host(ops.memory), Host(fused.memory), "memory" + at);
      for (int i = 0; i < 3; ++i) {
        ExpectBitEqual(Host(ops.window[i]), Host(fused.window[i]), "window[" + std::to_string(i) + "]" + at);
      }
    }
  }
};

TEST_P(DeltaDecodeTest, EqualsTheOpsOneByOneOnOneThread) { ExpectSameAsOpByOp(nullptr); }

TEST_P(DeltaDecodeTest, EqualsTheOpsOneByOneOnAPool) {
  cpu::ThreadPool pool(2);
  ExpectSameAsOpByOp(&pool);
}

TEST_P(DeltaDecodeTest, EqualsTheOpsOneByOneWithTheGenericStep) {
  internal::ForceGenericGatedDeltaForTesting(true);
  cpu::ThreadPool pool(2);
  ExpectSameAsOpByOp(&pool);
  internal::ForceGenericGatedDeltaForTesting(false);
}

INSTANTIATE_TEST_SUITE_P(Shapes, DeltaDecodeTest,
                         ::testing::Values(Case{1, 4, 64, 64, true, true}, Case{3, 4, 64, 64, true, true},
                                           Case{1, 2, 16, 16, true, true}, Case{3, 2, 32, 128, false, true},
                                           Case{1, 2, 128, 32, true, false}, Case{3, 1, 8, 24, false, false}));

// The arguments DeltaDecode refuses, each from otherwise valid ones.
TEST(DeltaDecodeArgsTest, RefusesWhatItCannotFuse) {
  const Case c{2, 2, 16, 16, true, true};
  Layer l(c);
  const StepInputs in = Inputs(l, 0);
  const Context cpu{.device = Device::kCpu};
  auto refused = [&](auto change, const char* what) {
    Fused f(l, in);
    change(f);
    EXPECT_FALSE(DeltaDecode(cpu, f.args).ok()) << what;
  };
  { Fused f(l, in); EXPECT_TRUE(DeltaDecode(cpu, f.args).ok()); }
  refused([](Fused& f) { f.args.conv[1].silu = false; }, "a conv without SiLU");
  const Tensor bias = Zeros({l.d[0]}), wide_taps = Zeros({kWidth, l.d[0] + 8});
  refused([&](Fused& f) { f.args.conv[0].bias = &bias; }, "a conv with bias");
  refused([](Fused& f) { f.args.taps[2] = nullptr; }, "no taps");
  refused([&](Fused& f) { f.args.taps[0] = &wide_taps; }, "taps of another width");
  refused([](Fused& f) { f.args.memory.rule = LinearMemoryRule::kAdditive; }, "another memory rule");
  refused([](Fused& f) { f.args.memory.q = &f.k; }, "memory's q not conv[0]'s out");
  refused([](Fused& f) { f.args.decay = nullptr; }, "decay logits without a decay to write");
  refused([](Fused& f) { f.args.memory.beta = &f.decay; }, "memory's beta not beta");
  refused([](Fused& f) { f.args.a_log = nullptr; }, "decay logits without a_log");
  Tensor cu2 = *Tensor::FromHostI32(std::vector<int32_t>{0, 2, 2}, {3}, Device::kCpu);
  refused(
      [&](Fused& f) {
        for (int i = 0; i < 3; ++i) f.args.conv[i].layout.cu_seqlens = &cu2;
        f.args.memory.layout.cu_seqlens = &cu2;
      },
      "a sequence of two tokens");
  EXPECT_EQ(DeltaDecode({.device = Device::kCudaEmu}, Fused(l, in).args).code(), absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace mcserve::kernels
