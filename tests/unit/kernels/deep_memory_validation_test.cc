// DeepMemory's validation: every bad argument is InvalidArgument and the message names it.
#include <functional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/deep_memory/deep_memory.h"

namespace mcserve::kernels {
namespace {

using Rule = DeepMemoryRule;

Tensor I32(const std::vector<int32_t>& v) {
  return *Tensor::FromHostI32(v, {static_cast<int64_t>(v.size())}, Device::kCpu);
}

// Bad arguments are InvalidArgument naming the argument.
TEST(DeepMemoryValidation, BadArgumentsAreNamed) {
  const int64_t t = 3, h = 2, d = 4, p = 2 * 4 * d * d, slots = 2;
  auto zeros = [](Shape s) { return *Tensor::Zeros(DType::kF32, std::move(s), Device::kCpu); };
  Tensor q = zeros({t, h, d}), k = zeros({t, h, d}), v = zeros({t, h, d}), gate = zeros({t, h});
  Tensor memory = zeros({slots, h, p}), momentum = zeros({slots, h, p}), anchor = zeros({slots, h, p});
  Tensor out = zeros({t, h, d}), ln_w = zeros({h, d}), ln_b = zeros({h, d});
  Tensor k_bad = zeros({t, h, d + 1}), gate_bad = zeros({t, h + 1}), memory_bad = zeros({slots, h, p / 2});
  Tensor mom_bad = zeros({slots, h, p + 1}), ln_bad = zeros({h, d + 1}), q2d = zeros({t, h * d});
  Tensor qi32 = *Tensor::Zeros(DType::kI32, {t, h, d}, Device::kCpu);
  Tensor cu = I32({0, 1, 3}), slot_ids = I32({1, 0}), off = I32({0, 2}), off_oob = I32({0, 3}), off_short = I32({0});
  Tensor slots_oob = I32({1, 2});
  auto base = [&](Rule r, int chunk) {
    DeepMemoryArgs a;
    a.rule = r;
    a.inner_chunk_size = chunk;
    a.q = &q;
    a.k = &k;
    a.v = &v;
    a.step = &gate;
    a.layout = {&cu, &slot_ids};
    a.memory = &memory;
    a.out = &out;
    if (r == Rule::kTitans) {
      a.retention = &gate;
      a.momentum_gate = &gate;
      a.momentum = &momentum;
    }
    if (chunk > 1) {
      a.inner_offset = &off;
      a.anchor = &anchor;
    }
    return a;
  };
  for (Rule r : {Rule::kDla, Rule::kTitans}) {
    for (int chunk : {1, 3}) {
      DeepMemoryArgs a = base(r, chunk);
      ASSERT_TRUE(DeepMemory(Context{}, a).ok());
      a.ln_weight = &ln_w;
      a.ln_bias = &ln_b;
      ASSERT_TRUE(DeepMemory(Context{}, a).ok());
    }
  }
  struct Bad {
    std::string want;  // a substring of the message: the argument's name
    DeepMemoryArgs args;
  };
  std::vector<Bad> bad;
  auto add = [&](std::string want, Rule r, int chunk, const std::function<void(DeepMemoryArgs&)>& mutate) {
    DeepMemoryArgs a = base(r, chunk);
    mutate(a);
    bad.push_back({std::move(want), a});
  };
  add("q", Rule::kDla, 1, [&](auto& a) { a.q = nullptr; });
  add("q", Rule::kDla, 1, [&](auto& a) { a.q = &q2d; });
  add("q", Rule::kDla, 1, [&](auto& a) { a.q = &qi32; });
  add("k", Rule::kDla, 1, [&](auto& a) { a.k = &k_bad; });
  add("v", Rule::kDla, 1, [&](auto& a) { a.v = &k_bad; });
  add("step", Rule::kDla, 1, [&](auto& a) { a.step = &gate_bad; });
  add("out", Rule::kDla, 1, [&](auto& a) { a.out = &k_bad; });
  add("memory", Rule::kDla, 1, [&](auto& a) { a.memory = &memory_bad; });
  add("expansion", Rule::kDla, 1, [&](auto& a) { a.expansion = 0; });
  add("memory", Rule::kDla, 1, [&](auto& a) { a.expansion = 2; });  // P no longer 2·e·d
  add("inner_chunk_size", Rule::kDla, 1, [&](auto& a) { a.inner_chunk_size = 0; });
  add("retention", Rule::kDla, 1, [&](auto& a) { a.retention = &gate; });
  add("momentum", Rule::kDla, 1, [&](auto& a) { a.momentum = &momentum; });
  add("retention", Rule::kTitans, 1, [&](auto& a) { a.retention = nullptr; });
  add("momentum_gate", Rule::kTitans, 1, [&](auto& a) { a.momentum_gate = &gate_bad; });
  add("momentum", Rule::kTitans, 1, [&](auto& a) { a.momentum = nullptr; });
  add("momentum", Rule::kTitans, 1, [&](auto& a) { a.momentum = &mom_bad; });
  add("anchor", Rule::kDla, 1, [&](auto& a) { a.anchor = &anchor; });
  add("anchor", Rule::kDla, 3, [&](auto& a) { a.anchor = nullptr; });
  add("anchor", Rule::kDla, 3, [&](auto& a) { a.anchor = &mom_bad; });
  add("inner_offset", Rule::kDla, 3, [&](auto& a) { a.inner_offset = nullptr; });
  add("inner_offset", Rule::kDla, 3, [&](auto& a) { a.inner_offset = &off_oob; });
  add("inner_offset", Rule::kDla, 3, [&](auto& a) { a.inner_offset = &off_short; });
  add("ln_bias", Rule::kDla, 1, [&](auto& a) { a.ln_weight = &ln_w; });
  add("ln_weight", Rule::kDla, 1, [&](auto& a) { a.ln_weight = &ln_bad; a.ln_bias = &ln_b; });
  add("ln_eps", Rule::kDla, 1, [&](auto& a) { a.ln_weight = &ln_w; a.ln_bias = &ln_b; a.ln_eps = 0.0f; });
  add("slot", Rule::kDla, 1, [&](auto& a) { a.layout.slot_ids = &slots_oob; });
  add("cu_seqlens", Rule::kDla, 1, [&](auto& a) { a.layout.cu_seqlens = nullptr; });
  add("out overlaps q", Rule::kDla, 1, [&](auto& a) { a.out = &q; });
  add("anchor", Rule::kDla, 3, [&](auto& a) { a.anchor = &memory; });
  add("unknown rule", Rule::kDla, 1, [&](auto& a) { a.rule = static_cast<Rule>(7); });
  for (const Bad& b : bad) {
    const absl::Status s = DeepMemory(Context{}, b.args);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << b.want << ": " << s;
    EXPECT_NE(s.message().find(b.want), std::string::npos) << b.want << ": " << s;
  }
}

}  // namespace
}  // namespace mcserve::kernels
