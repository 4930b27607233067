// HopeMemory's validation: bad options, missing, forbidden or misshapen tensors, a bad phase, a bad
// layout and read-only or overlapping outputs are InvalidArgument naming the culprit.
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/hope_memory/hope_memory.h"

namespace mcserve::kernels {
namespace {

// A valid call (momentum data, K = 4, q_pre given) whose pieces the tests break one at a time.
struct Fixture {
  HopeMemoryOptions opt{.head_dim = 3, .expansion = 2, .conv_size = 4, .chunk_size_other = 2, .chunk_size_mem = 3,
                        .momentum = HopeMomentum::kData};
  int64_t t = 3, h = 2, d = 3, s = 2;
  Tensor x, q_pre, beta, skip, conv_w, phase, cu, slots, memory, mem_anchor, momentum, fast, fast_anchor,
      fast_momentum, conv_q, conv_k, conv_v, out;

  static Tensor Zeros(const Shape& shape) { return *Tensor::Zeros(DType::kF32, shape, Device::kCpu); }
  static Tensor I32(const std::vector<int32_t>& v) {
    return *Tensor::FromHostI32(v, {static_cast<int64_t>(v.size())}, Device::kCpu);
  }

  Fixture() {
    const int64_t pm = HopeMemParams(opt), pf = HopeFastParams(opt);
    x = Zeros({t, h, d});
    q_pre = Zeros({t, h, d});
    beta = Zeros({t, h});
    skip = Zeros({2, h, d});
    conv_w = Zeros({h * d, 1, 4});
    phase = I32({0, 5});
    cu = I32({0, 1, 3});
    slots = I32({1, 0});
    memory = Zeros({s, h, pm});
    mem_anchor = Zeros({s, h, pm});
    momentum = Zeros({s, h, pm});
    fast = Zeros({s, h, pf});
    fast_anchor = Zeros({s, h, pf});
    fast_momentum = Zeros({s, h, pf});
    conv_q = Zeros({s, 3, h * d});
    conv_k = Zeros({s, 3, h * d});
    conv_v = Zeros({s, 3, h * d});
    out = Zeros({t, h, d});
  }

  HopeMemoryArgs Args() {
    return {.options = opt, .x = &x, .q_pre = &q_pre, .beta = &beta, .skip = &skip, .q_conv = &conv_w,
            .k_conv = &conv_w, .v_conv = &conv_w, .phase = &phase, .layout = {.cu_seqlens = &cu, .slot_ids = &slots},
            .memory = &memory, .mem_anchor = &mem_anchor, .fast = &fast, .fast_anchor = &fast_anchor,
            .momentum = &momentum, .fast_momentum = &fast_momentum, .conv_q = &conv_q, .conv_k = &conv_k,
            .conv_v = &conv_v, .out = &out};
  }
};

// InvalidArgument whose message contains `name`.
void ExpectBad(const HopeMemoryArgs& a, const std::string& name) {
  const absl::Status s = HopeMemory(Context{}, a);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << name << ": " << s;
  EXPECT_NE(s.message().find(name), std::string::npos) << name << ": " << s;
}

TEST(HopeMemoryValidationTest, TheFixtureIsValid) {
  Fixture f;
  const absl::Status s = HopeMemory(Context{}, f.Args());
  EXPECT_TRUE(s.ok()) << s;
}

TEST(HopeMemoryValidationTest, BadOptionsAreNamed) {
  Fixture f;
  const std::vector<std::pair<std::string, void (*)(HopeMemoryOptions&)>> cases = {
      {"head_dim", [](HopeMemoryOptions& o) { o.head_dim = 0; }},
      {"expansion", [](HopeMemoryOptions& o) { o.expansion = 0; }},
      {"conv_size", [](HopeMemoryOptions& o) { o.conv_size = 0; }},
      {"chunk_size_other", [](HopeMemoryOptions& o) { o.chunk_size_other = 0; }},
      {"chunk_size_mem", [](HopeMemoryOptions& o) { o.chunk_size_mem = -1; }},
      {"grad_scale", [](HopeMemoryOptions& o) { o.grad_scale = 0.0f; }},
      {"eta_scale", [](HopeMemoryOptions& o) { o.eta_scale = -1.0f; }},
      {"activation", [](HopeMemoryOptions& o) { o.activation = static_cast<HopeActivation>(7); }},
      {"eta_activation", [](HopeMemoryOptions& o) { o.eta_activation = static_cast<HopeEtaActivation>(7); }},
      {"w1_rule", [](HopeMemoryOptions& o) { o.w1_rule = static_cast<HopeW1Rule>(7); }},
      {"momentum", [](HopeMemoryOptions& o) { o.momentum = static_cast<HopeMomentum>(7); }},
      {"momentum_beta",
       [](HopeMemoryOptions& o) {
         o.momentum = HopeMomentum::kConstant;
         o.momentum_beta = 1.0f;
       }},
  };
  for (const auto& [name, apply] : cases) {
    HopeMemoryArgs a = f.Args();
    apply(a.options);
    ExpectBad(a, name);
  }
}

TEST(HopeMemoryValidationTest, RequiredAndForbiddenTensorsAreNamed) {
  Fixture f;
  HopeMemoryArgs a = f.Args();
  a.x = nullptr;
  ExpectBad(a, "required");
  a = f.Args();
  a.phase = nullptr;
  ExpectBad(a, "required");
  a = f.Args();
  a.q_pre = nullptr;  // required without adaptive_q
  ExpectBad(a, "q_pre");
  a = f.Args();
  a.options.adaptive_q = true;  // then forbidden (and fast grows by M_q)
  ExpectBad(a, "q_pre");
  a = f.Args();
  a.beta = nullptr;  // required by momentum data
  ExpectBad(a, "beta");
  a = f.Args();
  a.options.momentum = HopeMomentum::kConstant;  // beta forbidden
  ExpectBad(a, "beta");
  a = f.Args();
  a.options.momentum = HopeMomentum::kNone;
  a.beta = nullptr;  // momentum tensors forbidden
  ExpectBad(a, "momentum");
  a = f.Args();
  a.fast_momentum = nullptr;
  ExpectBad(a, "fast_momentum");
  a = f.Args();
  a.conv_k = nullptr;  // required with K = 4
  ExpectBad(a, "conv_k");
  a = f.Args();
  a.options.conv_size = 1;  // conv windows forbidden with K = 1 (taps are checked first)
  Tensor taps1 = Fixture::Zeros({f.h * f.d, 1, 1});
  a.q_conv = a.k_conv = a.v_conv = &taps1;
  ExpectBad(a, "conv_q");
}

TEST(HopeMemoryValidationTest, MisshapenTensorsAreNamed) {
  Fixture f;
  Tensor x_bad_d = Fixture::Zeros({f.t, f.h, f.d + 1}), td = Fixture::Zeros({f.t, f.h, f.d - 1});
  Tensor beta_bad = Fixture::Zeros({f.t, f.h + 1}), skip_bad = Fixture::Zeros({1, f.h, f.d});
  Tensor taps_bad = Fixture::Zeros({f.h * f.d, 1, 3}), mem_bad = Fixture::Zeros({f.s, f.h, HopeMemParams(f.opt) + 1});
  Tensor fast_bad = Fixture::Zeros({f.s, f.h, HopeFastParams(f.opt) - 1}), win_bad = Fixture::Zeros({f.s, 2, f.h * f.d});
  Tensor out_bad = Fixture::Zeros({f.t, f.h, f.d + 1});
  Tensor x_i32 = *Tensor::Zeros(DType::kI32, {f.t, f.h, f.d}, Device::kCpu);
  Tensor phase_f32 = Fixture::Zeros({2}), phase_short = Fixture::I32({0});
  struct Case {
    std::string name;
    HopeMemoryArgs a;
  };
  std::vector<Case> cases;
  auto with = [&](const std::string& name, auto change) {
    HopeMemoryArgs a = f.Args();
    change(a);
    cases.push_back({name, a});
  };
  with("x", [&](HopeMemoryArgs& a) { a.x = &x_bad_d; });
  with("x", [&](HopeMemoryArgs& a) { a.x = &x_i32; });
  with("q_pre", [&](HopeMemoryArgs& a) { a.q_pre = &td; });
  with("beta", [&](HopeMemoryArgs& a) { a.beta = &beta_bad; });
  with("skip", [&](HopeMemoryArgs& a) { a.skip = &skip_bad; });
  with("v_conv", [&](HopeMemoryArgs& a) { a.v_conv = &taps_bad; });
  with("memory", [&](HopeMemoryArgs& a) { a.memory = &mem_bad; });
  with("mem_anchor", [&](HopeMemoryArgs& a) { a.mem_anchor = &mem_bad; });
  with("momentum", [&](HopeMemoryArgs& a) { a.momentum = &mem_bad; });
  with("fast", [&](HopeMemoryArgs& a) { a.fast = &fast_bad; });
  with("fast_anchor", [&](HopeMemoryArgs& a) { a.fast_anchor = &fast_bad; });
  with("conv_v", [&](HopeMemoryArgs& a) { a.conv_v = &win_bad; });
  with("out", [&](HopeMemoryArgs& a) { a.out = &out_bad; });
  with("phase", [&](HopeMemoryArgs& a) { a.phase = &phase_f32; });
  with("phase", [&](HopeMemoryArgs& a) { a.phase = &phase_short; });
  for (const Case& c : cases) ExpectBad(c.a, c.name);
}

TEST(HopeMemoryValidationTest, BadPhaseLayoutAndOutputsAreNamed) {
  Fixture f;
  Tensor neg = Fixture::I32({0, -1}), cu_bad = Fixture::I32({0, 2, 4}), slots_oob = Fixture::I32({1, 2});
  HopeMemoryArgs a = f.Args();
  a.phase = &neg;
  ExpectBad(a, "phase[1]");
  a = f.Args();
  a.layout.cu_seqlens = &cu_bad;
  ExpectBad(a, "HopeMemory");
  a = f.Args();
  a.layout.slot_ids = &slots_oob;
  ExpectBad(a, "HopeMemory");
  a = f.Args();
  a.mem_anchor = &f.memory;  // written twice
  ExpectBad(a, "overlaps");
  a = f.Args();
  a.out = &f.x;  // out over an input
  ExpectBad(a, "overlaps");
  const std::vector<float> backing = *f.conv_q.ToHostF32();
  Tensor ro2 = Tensor::WrapHost(backing.data(), DType::kF32, f.conv_q.shape(), nullptr);
  a = f.Args();
  a.conv_q = &ro2;
  ExpectBad(a, "read-only");
}

}  // namespace
}  // namespace mcserve::kernels
