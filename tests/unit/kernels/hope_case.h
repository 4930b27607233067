// Test helper for HopeMemory and its two halves (HopeFeatures then HopeMemWrite, with Case::split): a
// random case (memory MLP weights, conv taps, skip, and a state pool
// whose slots sit at chosen positions with random anchors, momentum and conv windows), and a run of
// chained varlen calls through that pool on one device. Shared by hope_memory_test.cc (CPU against a
// double reference) and hope_memory_emu_test.cc (CUDA emulator against the CPU).
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "kernels/hope_memory/hope_features.h"
#include "kernels/hope_memory/hope_mem_write.h"
#include "kernels/hope_memory/hope_memory.h"
#include "random_inputs.h"

namespace mcserve::kernels::hope_case {

// The state pool on the host. memory, mem_anchor, momentum [slots, H, Pm]; fast, fast_anchor,
// fast_momentum [slots, H, Pf] (momentum ones empty without momentum); conv_* [slots, K − 1, H·d];
// pos [slots] = tokens each slot has seen.
struct Pool {
  std::vector<float> memory, mem_anchor, momentum, fast, fast_anchor, fast_momentum, conv_q, conv_k, conv_v;
  std::vector<int64_t> pos;
};

struct Case {
  HopeMemoryOptions opt{.head_dim = 5, .expansion = 2, .conv_size = 4, .chunk_size_other = 3, .chunk_size_mem = 5};
  int64_t heads = 2, num_slots = 4;
  bool with_skip = true;
  bool split = false;  // run HopeFeatures then HopeMemWrite instead of HopeMemory
  std::vector<float> q_conv, k_conv, v_conv;  // [H·d, 1, K]
  std::vector<float> skip;                    // [2, H, d] (with_skip)
  Pool pool;

  int64_t d() const { return opt.head_dim; }
  int64_t e() const { return static_cast<int64_t>(opt.expansion) * opt.head_dim; }
  int64_t k() const { return opt.conv_size; }
  int64_t pm() const { return HopeMemParams(opt); }
  int64_t pf() const { return HopeFastParams(opt); }
  bool has_momentum() const { return opt.momentum != HopeMomentum::kNone; }
  int64_t phase_period() const { return static_cast<int64_t>(opt.chunk_size_other) * opt.chunk_size_mem; }

  // Random weights (W2 ~ U(±1)/√d, W1 ~ U(±1)/√E), anchors, momentum (U(±0.05)), windows (U(±1)),
  // conv taps (U(±0.6)), skip (U(±0.5)); slot positions {0, 7, 2, 16, 1, …}.
  void Randomize(uint32_t seed) {
    const int64_t hd = heads * d(), kw = heads * d() * k();
    q_conv = RandomVector(kw, seed + 1, -0.6f, 0.6f);
    k_conv = RandomVector(kw, seed + 2, -0.6f, 0.6f);
    v_conv = RandomVector(kw, seed + 3, -0.6f, 0.6f);
    skip = with_skip ? RandomVector(2 * hd, seed + 4, -0.5f, 0.5f) : std::vector<float>{};
    pool.memory = Weights(pm(), false, seed + 10);
    pool.mem_anchor = Weights(pm(), false, seed + 11);
    pool.fast = Weights(pf(), true, seed + 12);
    pool.fast_anchor = Weights(pf(), true, seed + 13);
    pool.momentum = has_momentum() ? RandomVector(num_slots * heads * pm(), seed + 14, -0.05f, 0.05f)
                                   : std::vector<float>{};
    pool.fast_momentum = has_momentum() ? RandomVector(num_slots * heads * pf(), seed + 15, -0.05f, 0.05f)
                                        : std::vector<float>{};
    const int64_t win = num_slots * (k() - 1) * hd;
    pool.conv_q = RandomVector(win, seed + 16);
    pool.conv_k = RandomVector(win, seed + 17);
    pool.conv_v = RandomVector(win, seed + 18);
    pool.pos.clear();
    const int64_t start[] = {0, 7, 2, 16, 1, 11};
    for (int64_t s = 0; s < num_slots; ++s) pool.pos.push_back(start[s % 6]);
  }

 private:
  // One memory [E·d + o·E]: W2 /√d, W1 /√E.
  void Mlp(float* w, int64_t o, uint32_t seed) const {
    const std::vector<float> r = RandomVector(e() * d() + o * e(), seed);
    for (int64_t i = 0; i < static_cast<int64_t>(r.size()); ++i) {
      w[i] = r[i] / static_cast<float>(std::sqrt(static_cast<double>(i < e() * d() ? d() : e())));
    }
  }
  // A pool of `per_head` floats per (slot, head): mem alone, or fast (k, v, eta, alpha (, q)).
  std::vector<float> Weights(int64_t per_head, bool fast, uint32_t seed) const {
    std::vector<float> w(num_slots * heads * per_head);
    for (int64_t sh = 0; sh < num_slots * heads; ++sh) {
      float* p = w.data() + sh * per_head;
      const uint32_t s = seed * 1000u + static_cast<uint32_t>(sh) * 10u;
      if (!fast) {
        Mlp(p, d(), s);
        continue;
      }
      const int64_t os[] = {d(), d(), 1, 1, d()};
      for (int m = 0; m < (opt.adaptive_q ? 5 : 4); ++m) {
        Mlp(p, os[m], s + m);
        p += e() * d() + os[m] * e();
      }
    }
    return w;
  }
};

// One call's inputs: x, q_pre [T, H, d] (q_pre empty with adaptive_q), beta [T, H] (kData only).
struct Inputs {
  std::vector<float> x, q_pre, beta;
};

inline Inputs MakeInputs(const Case& c, int64_t t, uint32_t seed) {
  Inputs in;
  in.x = RandomVector(t * c.heads * c.d(), seed);
  if (!c.opt.adaptive_q) in.q_pre = RandomVector(t * c.heads * c.d(), seed + 1);
  if (c.opt.momentum == HopeMomentum::kData) in.beta = RandomVector(t * c.heads, seed + 2, 0.5f, 0.95f);
  return in;
}

// One call: sequence i has lens[i] rows in slot slots[i]; inputs drawn from seed unless given.
// phase[i] = pool.pos[slots[i]] mod C_o·C_mem.
struct Call {
  std::vector<int32_t> lens, slots;
  uint32_t seed = 0;
  std::optional<Inputs> inputs;
};

inline int64_t Rows(const Call& call) {
  int64_t t = 0;
  for (int32_t n : call.lens) t += n;
  return t;
}

inline Inputs CallInputs(const Case& c, const Call& call) {
  return call.inputs.has_value() ? *call.inputs : MakeInputs(c, Rows(call), call.seed);
}

inline std::vector<int32_t> Phases(const Case& c, const Pool& pool, const Call& call) {
  std::vector<int32_t> ph;
  for (int32_t s : call.slots) {
    const int64_t pos = s >= 0 && s < c.num_slots ? pool.pos[s] : 0;
    ph.push_back(static_cast<int32_t>(pos % c.phase_period()));
  }
  return ph;
}

struct Result {
  absl::Status status;
  std::vector<float> out;  // every call's [T, H, d], concatenated
  Pool pool;
  int64_t clamped = 0;     // (token, head) pairs whose η the clamp lowered (set by the reference only)
};

// The state pool as tensors on one device (unused ones left empty and passed as null).
struct DevicePool {
  Tensor memory, mem_anchor, momentum, fast, fast_anchor, fast_momentum, conv_q, conv_k, conv_v;

  DevicePool(const Case& c, Device dev) {
    const int64_t s = c.num_slots, h = c.heads, w = c.k() - 1, hd = h * c.d();
    memory = *Tensor::FromHost(c.pool.memory, {s, h, c.pm()}, dev);
    mem_anchor = *Tensor::FromHost(c.pool.mem_anchor, {s, h, c.pm()}, dev);
    fast = *Tensor::FromHost(c.pool.fast, {s, h, c.pf()}, dev);
    fast_anchor = *Tensor::FromHost(c.pool.fast_anchor, {s, h, c.pf()}, dev);
    if (c.has_momentum()) {
      momentum = *Tensor::FromHost(c.pool.momentum, {s, h, c.pm()}, dev);
      fast_momentum = *Tensor::FromHost(c.pool.fast_momentum, {s, h, c.pf()}, dev);
    }
    if (w > 0) {
      conv_q = *Tensor::FromHost(c.pool.conv_q, {s, w, hd}, dev);
      conv_k = *Tensor::FromHost(c.pool.conv_k, {s, w, hd}, dev);
      conv_v = *Tensor::FromHost(c.pool.conv_v, {s, w, hd}, dev);
    }
  }

  // Back to the host, with positions `pos`.
  Pool ToHost(const std::vector<int64_t>& pos) const {
    auto host = [](const Tensor& t) { return t.rank() > 0 ? *t.ToHostF32() : std::vector<float>{}; };
    return {host(memory), host(mem_anchor), host(momentum), host(fast), host(fast_anchor), host(fast_momentum),
            host(conv_q), host(conv_k), host(conv_v), pos};
  }
};

// The call's arguments over `pool` and the given tensors.
inline HopeMemoryArgs MakeArgs(const Case& c, DevicePool& pool, const Tensor& x, const Tensor& q_pre,
                               const Tensor& beta, const Tensor& skip, const Tensor* conv_w, const Tensor& phase,
                               const BatchLayout& layout, Tensor& out) {
  const bool mom = c.has_momentum(), win = c.k() > 1;
  return {.options = c.opt, .x = &x, .q_pre = c.opt.adaptive_q ? nullptr : &q_pre,
          .beta = c.opt.momentum == HopeMomentum::kData ? &beta : nullptr, .skip = c.with_skip ? &skip : nullptr,
          .q_conv = &conv_w[0], .k_conv = &conv_w[1], .v_conv = &conv_w[2], .phase = &phase, .layout = layout,
          .memory = &pool.memory, .mem_anchor = &pool.mem_anchor, .fast = &pool.fast,
          .fast_anchor = &pool.fast_anchor, .momentum = mom ? &pool.momentum : nullptr,
          .fast_momentum = mom ? &pool.fast_momentum : nullptr, .conv_q = win ? &pool.conv_q : nullptr,
          .conv_k = win ? &pool.conv_k : nullptr, .conv_v = win ? &pool.conv_v : nullptr, .out = &out};
}

// HopeFeatures then HopeMemWrite over the same arguments (features in fresh tensors [T, H, d] / [T, H]).
inline absl::Status RunSplit(const Context& ctx, const HopeMemoryArgs& a, Device dev) {
  const int64_t t = a.x->dim(0), h = a.x->dim(1), d = a.options.head_dim;
  Tensor q = *Tensor::Zeros(DType::kF32, {t, h, d}, dev), k = *Tensor::Zeros(DType::kF32, {t, h, d}, dev),
         v = *Tensor::Zeros(DType::kF32, {t, h, d}, dev), alpha = *Tensor::Zeros(DType::kF32, {t, h}, dev),
         eta = *Tensor::Zeros(DType::kF32, {t, h}, dev);
  absl::Status s = HopeFeatures(
      ctx, {.options = a.options, .x = a.x, .q_pre = a.q_pre, .beta = a.beta, .skip = a.skip, .q_conv = a.q_conv, .k_conv = a.k_conv,
            .v_conv = a.v_conv, .phase = a.phase, .layout = a.layout, .fast = a.fast, .fast_anchor = a.fast_anchor,
            .fast_momentum = a.fast_momentum, .conv_q = a.conv_q, .conv_k = a.conv_k, .conv_v = a.conv_v, .q = &q,
            .k = &k, .v = &v, .alpha = &alpha, .eta = &eta});
  if (!s.ok()) return s;
  return HopeMemWrite(ctx, {.options = a.options, .q = &q, .k = &k, .v = &v, .alpha = &alpha, .eta = &eta,
                            .beta = a.beta, .phase = a.phase, .layout = a.layout, .memory = a.memory,
                            .mem_anchor = a.mem_anchor, .momentum = a.momentum, .out = a.out});
}

// Runs `calls` in order through one state pool on `dev`: concatenated outputs and the final pool.
inline Result RunHope(const Case& c, const std::vector<Call>& calls, Device dev) {
  DevicePool pool(c, dev);
  std::vector<int64_t> pos = c.pool.pos;
  const int64_t h = c.heads, d = c.d();
  const Tensor conv_w[3] = {*Tensor::FromHost(c.q_conv, {h * d, 1, c.k()}, dev),
                            *Tensor::FromHost(c.k_conv, {h * d, 1, c.k()}, dev),
                            *Tensor::FromHost(c.v_conv, {h * d, 1, c.k()}, dev)};
  const Tensor skip = c.with_skip ? *Tensor::FromHost(c.skip, {2, h, d}, dev) : Tensor();
  const Context ctx{.device = dev};
  Result r;
  for (const Call& call : calls) {
    std::vector<int32_t> cu = {0};
    for (int32_t n : call.lens) cu.push_back(cu.back() + n);
    const int64_t t = cu.back(), nb = static_cast<int64_t>(call.lens.size());
    const Inputs in = CallInputs(c, call);
    const std::vector<int32_t> ph = Phases(c, Pool{.pos = pos}, call);
    const Tensor x = *Tensor::FromHost(in.x, {t, h, d}, dev);
    const Tensor q_pre = c.opt.adaptive_q ? Tensor() : *Tensor::FromHost(in.q_pre, {t, h, d}, dev);
    const Tensor beta =
        c.opt.momentum == HopeMomentum::kData ? *Tensor::FromHost(in.beta, {t, h}, dev) : Tensor();
    const Tensor phase = *Tensor::FromHostI32(ph, {nb}, dev);
    const Tensor cu_t = *Tensor::FromHostI32(cu, {nb + 1}, dev);
    const Tensor slot_t = *Tensor::FromHostI32(call.slots, {nb}, dev);
    Tensor out = *Tensor::Zeros(DType::kF32, {t, h, d}, dev);
    const HopeMemoryArgs args =
        MakeArgs(c, pool, x, q_pre, beta, skip, conv_w, phase, {.cu_seqlens = &cu_t, .slot_ids = &slot_t}, out);
    r.status = c.split ? RunSplit(ctx, args, dev) : HopeMemory(ctx, args);
    if (!r.status.ok()) return r;
    const std::vector<float> o = *out.ToHostF32();
    r.out.insert(r.out.end(), o.begin(), o.end());
    for (size_t i = 0; i < call.slots.size(); ++i) {
      if (call.slots[i] >= 0 && call.slots[i] < c.num_slots) pos[call.slots[i]] += call.lens[i];
    }
  }
  r.pool = pool.ToHost(pos);
  return r;
}

}  // namespace mcserve::kernels::hope_case
