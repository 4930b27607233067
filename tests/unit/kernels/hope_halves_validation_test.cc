// HopeFeatures' and HopeMemWrite's validation: bad options, missing, forbidden or misshapen tensors, a
// bad phase, a bad layout and overlapping or read-only outputs are InvalidArgument naming the culprit.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/hope_memory/hope_features.h"
#include "kernels/hope_memory/hope_mem_write.h"

namespace mcserve::kernels {
namespace {

// A valid pair of calls (momentum data, K = 4, q_pre given) whose pieces the tests break one at a time.
struct Fixture {
  HopeMemoryOptions opt{.head_dim = 3, .expansion = 2, .conv_size = 4, .chunk_size_other = 2, .chunk_size_mem = 3,
                        .momentum = HopeMomentum::kData};
  int64_t t = 3, h = 2, d = 3, s = 2;
  Tensor x, q_pre, beta, conv_w, phase, cu, slots, memory, mem_anchor, momentum, read_weights, fast, fast_anchor,
      fast_momentum, conv_q, conv_k, conv_v, q, k, v, alpha, eta, out;

  static Tensor Zeros(const Shape& shape) { return *Tensor::Zeros(DType::kF32, shape, Device::kCpu); }
  static Tensor I32(const std::vector<int32_t>& vals) {
    return *Tensor::FromHostI32(vals, {static_cast<int64_t>(vals.size())}, Device::kCpu);
  }

  Fixture() {
    const int64_t pm = HopeMemParams(opt), pf = HopeFastParams(opt);
    x = Zeros({t, h, d});
    q_pre = Zeros({t, h, d});
    beta = Zeros({t, h});
    conv_w = Zeros({h * d, 1, 4});
    phase = I32({0, 5});
    cu = I32({0, 1, 3});
    slots = I32({1, 0});
    memory = Zeros({s, h, pm});
    mem_anchor = Zeros({s, h, pm});
    momentum = Zeros({s, h, pm});
    read_weights = Zeros({s, h, pm});
    fast = Zeros({s, h, pf});
    fast_anchor = Zeros({s, h, pf});
    fast_momentum = Zeros({s, h, pf});
    conv_q = Zeros({s, 3, h * d});
    conv_k = Zeros({s, 3, h * d});
    conv_v = Zeros({s, 3, h * d});
    q = Zeros({t, h, d});
    k = Zeros({t, h, d});
    v = Zeros({t, h, d});
    alpha = Zeros({t, h});
    eta = Zeros({t, h});
    out = Zeros({t, h, d});
  }

  HopeFeaturesArgs Features() {
    return {.options = opt, .x = &x, .q_pre = &q_pre, .beta = &beta, .q_conv = &conv_w, .k_conv = &conv_w, .v_conv = &conv_w,
            .phase = &phase, .layout = {.cu_seqlens = &cu, .slot_ids = &slots}, .fast = &fast,
            .fast_anchor = &fast_anchor, .fast_momentum = &fast_momentum, .conv_q = &conv_q, .conv_k = &conv_k,
            .conv_v = &conv_v, .q = &q, .k = &k, .v = &v, .alpha = &alpha, .eta = &eta};
  }
  HopeMemWriteArgs MemWrite() {
    return {.options = opt, .q = &q, .k = &k, .v = &v, .alpha = &alpha, .eta = &eta, .beta = &beta,
            .phase = &phase, .layout = {.cu_seqlens = &cu, .slot_ids = &slots}, .memory = &memory,
            .mem_anchor = &mem_anchor, .momentum = &momentum, .read_weights = &read_weights, .out = &out};
  }
};

template <class Args>
void ExpectBad(absl::Status (*op)(const Context&, const Args&), const Args& a, const std::string& name) {
  const absl::Status s = op(Context{}, a);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << name << ": " << s;
  EXPECT_NE(s.message().find(name), std::string::npos) << name << ": " << s;
}

TEST(HopeHalvesValidationTest, TheFixtureIsValid) {
  Fixture f;
  EXPECT_TRUE(HopeFeatures(Context{}, f.Features()).ok());
  EXPECT_TRUE(HopeMemWrite(Context{}, f.MemWrite()).ok());
}

TEST(HopeHalvesValidationTest, BadOptionsAreNamed) {
  Fixture f;
  HopeFeaturesArgs a = f.Features();
  a.options.chunk_size_other = 0;
  ExpectBad(&HopeFeatures, a, "HopeFeatures: chunk_size_other");
  HopeMemWriteArgs b = f.MemWrite();
  b.options.chunk_size_mem = 0;
  ExpectBad(&HopeMemWrite, b, "HopeMemWrite: chunk_size_mem");
  b = f.MemWrite();
  b.options.grad_scale = 0.0f;
  ExpectBad(&HopeMemWrite, b, "grad_scale");
}

TEST(HopeHalvesValidationTest, FeaturesTensorsAreNamed) {
  Fixture f;
  HopeFeaturesArgs a = f.Features();
  a.eta = nullptr;
  ExpectBad(&HopeFeatures, a, "required");
  a = f.Features();
  a.q_pre = nullptr;
  ExpectBad(&HopeFeatures, a, "q_pre");
  a = f.Features();
  a.options.momentum = HopeMomentum::kNone;
  a.beta = nullptr;
  ExpectBad(&HopeFeatures, a, "fast_momentum");
  Tensor bad = Fixture::Zeros({f.t, f.h + 1, f.d});
  a = f.Features();
  a.k = &bad;
  ExpectBad(&HopeFeatures, a, "k ");
  Tensor bad_alpha = Fixture::Zeros({f.t, f.h, 1});
  a = f.Features();
  a.alpha = &bad_alpha;
  ExpectBad(&HopeFeatures, a, "alpha");
  a = f.Features();
  a.options.conv_size = 1;
  ExpectBad(&HopeFeatures, a, "conv");
  a = f.Features();
  a.beta = nullptr;
  ExpectBad(&HopeFeatures, a, "beta");
  a = f.Features();
  a.v = &f.q;
  ExpectBad(&HopeFeatures, a, "overlaps");
  Tensor phase = Fixture::I32({0, -1});
  a = f.Features();
  a.phase = &phase;
  ExpectBad(&HopeFeatures, a, "phase[1]");
  Tensor slots = Fixture::I32({1, 1});
  a = f.Features();
  a.layout.slot_ids = &slots;
  ExpectBad(&HopeFeatures, a, "HopeFeatures");
}

TEST(HopeHalvesValidationTest, MemWriteTensorsAreNamed) {
  Fixture f;
  HopeMemWriteArgs a = f.MemWrite();
  a.k = nullptr;
  ExpectBad(&HopeMemWrite, a, "required");
  a = f.MemWrite();
  a.beta = nullptr;
  ExpectBad(&HopeMemWrite, a, "beta");
  a = f.MemWrite();
  a.options.momentum = HopeMomentum::kConstant;
  ExpectBad(&HopeMemWrite, a, "beta");
  a = f.MemWrite();
  a.options.momentum = HopeMomentum::kNone;
  a.beta = nullptr;
  ExpectBad(&HopeMemWrite, a, "momentum");
  Tensor bad = Fixture::Zeros({f.s, f.h, 7});
  a = f.MemWrite();
  a.read_weights = &bad;
  ExpectBad(&HopeMemWrite, a, "read_weights");
  Tensor bad_q = Fixture::Zeros({f.t, f.h, f.d + 1});
  a = f.MemWrite();
  a.q = &bad_q;
  ExpectBad(&HopeMemWrite, a, "q ");
  Tensor bad_v = Fixture::Zeros({f.t + 1, f.h, f.d});
  a = f.MemWrite();
  a.v = &bad_v;
  ExpectBad(&HopeMemWrite, a, "v");
  a = f.MemWrite();
  a.out = &f.q;
  ExpectBad(&HopeMemWrite, a, "overlaps");
  a = f.MemWrite();
  a.read_weights = &f.memory;
  ExpectBad(&HopeMemWrite, a, "overlaps");
  Tensor phase = Fixture::I32({-2, 0});
  a = f.MemWrite();
  a.phase = &phase;
  ExpectBad(&HopeMemWrite, a, "phase[0]");
}

// read_weights holds the weights each slot's last row read: before the write, the running weights the
// call started from when the sequence has one row.
TEST(HopeHalvesValidationTest, ReadWeightsHoldWhatTheLastRowRead) {
  Fixture f;
  f.opt.momentum = HopeMomentum::kNone;
  Tensor one_cu = Fixture::I32({0, 1}), one_slot = Fixture::I32({1}), one_phase = Fixture::I32({4});
  std::vector<float> w(f.memory.numel());
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.01f * static_cast<float>(i % 17);
  f.memory = *Tensor::FromHost(w, f.memory.shape(), Device::kCpu);
  HopeMemWriteArgs a = f.MemWrite();
  a.beta = nullptr;
  a.momentum = nullptr;
  Tensor q = f.q.Rows(0, 1), k = f.k.Rows(0, 1), v = f.v.Rows(0, 1), al = f.alpha.Rows(0, 1), et = f.eta.Rows(0, 1),
         out = f.out.Rows(0, 1);
  a.q = &q;
  a.k = &k;
  a.v = &v;
  a.alpha = &al;
  a.eta = &et;
  a.out = &out;
  a.phase = &one_phase;
  a.layout = {.cu_seqlens = &one_cu, .slot_ids = &one_slot};
  ASSERT_TRUE(HopeMemWrite(Context{}, a).ok());
  const std::vector<float> read = *f.read_weights.Rows(1, 2).ToHostF32();
  EXPECT_EQ(read, std::vector<float>(w.begin() + w.size() / 2, w.end()));
}

}  // namespace
}  // namespace mcserve::kernels
