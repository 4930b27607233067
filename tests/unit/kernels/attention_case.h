// Test helper for Attention: a random case (KV caches pre-filled with random values, so stale
// positions past `cached` hold garbage the op must never read), and a run of chained varlen calls
// through those caches on one device.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "kernels/attention/attention.h"
#include "kernels/cpu/thread_pool.h"
#include "random_inputs.h"

namespace mcserve::kernels {

struct AttentionCase {
  int64_t hq = 2, hkv = 2, dh = 16, num_slots = 4, capacity = 12;
  std::optional<float> scale;
  float magnitude = 1.0f;               // q, k drawn from [−magnitude, magnitude), v from [−1, 1)
  std::vector<float> k_cache, v_cache;  // [num_slots, capacity, hkv, dh]

  void Randomize(uint32_t seed) {
    k_cache = RandomVector(num_slots * capacity * hkv * dh, seed);
    v_cache = RandomVector(num_slots * capacity * hkv * dh, seed + 1);
  }
};

// One call's inputs: q [T, hq, dh], k, v [T, hkv, dh].
struct AttentionInputs {
  std::vector<float> q, k, v;
};

inline AttentionInputs MakeAttentionInputs(const AttentionCase& c, int64_t t, uint32_t s) {
  const float a = c.magnitude;
  return {RandomVector(t * c.hq * c.dh, s, -a, a), RandomVector(t * c.hkv * c.dh, s + 1, -a, a),
          RandomVector(t * c.hkv * c.dh, s + 2)};
}

// One call: per sequence its row count, slot and cached count; its q, k, v drawn from `seed`, or
// `inputs` when set.
struct AttentionCall {
  std::vector<int32_t> lens, slots, cached;
  uint32_t seed = 0;
  std::optional<AttentionInputs> inputs;
};

// The call's total row count T.
inline int64_t CallRows(const AttentionCall& call) {
  int64_t t = 0;
  for (int32_t n : call.lens) t += n;
  return t;
}

// The call's q, k, v.
inline AttentionInputs CallInputs(const AttentionCase& c, const AttentionCall& call) {
  return call.inputs.has_value() ? *call.inputs : MakeAttentionInputs(c, CallRows(call), call.seed);
}

struct AttentionResult {
  absl::Status status;
  std::vector<float> out, k_cache, v_cache;  // outputs of every call, concatenated; final caches
};

// Runs `calls` in order through one pair of caches on `dev` (CPU work on `pool`, may be null).
inline AttentionResult RunAttention(const AttentionCase& c, const std::vector<AttentionCall>& calls, Device dev,
                                    cpu::ThreadPool* pool = nullptr) {
  const Shape cache_shape = {c.num_slots, c.capacity, c.hkv, c.dh};
  Tensor k_cache = *Tensor::FromHost(c.k_cache, cache_shape, dev);
  Tensor v_cache = *Tensor::FromHost(c.v_cache, cache_shape, dev);
  const Context ctx{.device = dev, .pool = pool};
  AttentionResult r;
  for (const AttentionCall& call : calls) {
    std::vector<int32_t> cu = {0};
    for (int32_t n : call.lens) cu.push_back(cu.back() + n);
    const int64_t t = cu.back(), nb = static_cast<int64_t>(call.lens.size());
    const AttentionInputs in = CallInputs(c, call);
    Tensor q = *Tensor::FromHost(in.q, {t, c.hq, c.dh}, dev);
    Tensor k = *Tensor::FromHost(in.k, {t, c.hkv, c.dh}, dev);
    Tensor v = *Tensor::FromHost(in.v, {t, c.hkv, c.dh}, dev);
    Tensor out = *Tensor::Zeros(DType::kF32, {t, c.hq, c.dh}, dev);
    Tensor cu_t = *Tensor::FromHostI32(cu, {nb + 1}, dev);
    Tensor slot_t = *Tensor::FromHostI32(call.slots, {nb}, dev);
    Tensor cached_t = *Tensor::FromHostI32(call.cached, {nb}, dev);
    r.status = Attention(ctx, {.q = &q, .k = &k, .v = &v, .scale = c.scale, .cached = &cached_t,
                               .layout = {.cu_seqlens = &cu_t, .slot_ids = &slot_t}, .k_cache = &k_cache,
                               .v_cache = &v_cache, .out = &out});
    if (!r.status.ok()) return r;
    const std::vector<float> o = *out.ToHostF32();
    r.out.insert(r.out.end(), o.begin(), o.end());
  }
  r.k_cache = *k_cache.ToHostF32();
  r.v_cache = *v_cache.ToHostF32();
  return r;
}

}  // namespace mcserve::kernels
