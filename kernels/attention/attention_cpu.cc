// CPU Attention: first every sequence's k, v rows are copied into its slot's caches (one contiguous
// block per sequence, in parallel over sequences), then tasks are (row, query head) pairs run in
// parallel, each attending over its slot's cache with attention_math.h's AttendRow.
#include <cstring>
#include <vector>

#include "kernels/attention/attention.h"
#include "kernels/attention/attention_math.h"
#include "kernels/core/tensor_data.h"
#include "kernels/cpu/scratch.h"
#include "kernels/cpu/thread_pool.h"

namespace mcserve::kernels::internal {
namespace {

// Sizes and host pointers of one call: q, out [T, Hq, dh]; k, v [T, Hkv, dh]; caches
// [num_slots, capacity, Hkv, dh]; cu [B + 1], slots, cached [B].
struct CpuCall {
  int64_t hq, hkv, dh, capacity;
  float scale;
  const int32_t *cu, *slots, *cached;
  const float *q, *k, *v;
  float *k_cache, *v_cache, *out;
};

CpuCall MakeCall(const AttentionArgs& a) {
  return {.hq = a.q->dim(1), .hkv = a.k->dim(1), .dh = a.q->dim(2), .capacity = a.k_cache->dim(1),
          .scale = AttentionScale(a), .cu = Data<int32_t>(*a.layout.cu_seqlens),
          .slots = Data<int32_t>(*a.layout.slot_ids), .cached = Data<int32_t>(*a.cached), .q = Data<float>(*a.q),
          .k = Data<float>(*a.k), .v = Data<float>(*a.v), .k_cache = Data<float>(*a.k_cache),
          .v_cache = Data<float>(*a.v_cache), .out = Data<float>(*a.out)};
}

// Copies sequence b's rows of k and v to positions cached[b] .. of its slot's caches.
void AppendSequence(const CpuCall& c, int64_t b) {
  const int64_t row = c.hkv * c.dh, n = c.cu[b + 1] - c.cu[b];
  if (n == 0) return;
  const int64_t dst = (static_cast<int64_t>(c.slots[b]) * c.capacity + c.cached[b]) * row;
  const int64_t src = static_cast<int64_t>(c.cu[b]) * row;
  std::memcpy(c.k_cache + dst, c.k + src, n * row * sizeof(float));
  std::memcpy(c.v_cache + dst, c.v + src, n * row * sizeof(float));
}

}  // namespace

absl::Status AttentionCpu(const Context& ctx, const AttentionArgs& args) {
  const int64_t t = args.q->dim(0), num_seqs = args.layout.slot_ids->dim(0);
  if (t == 0 || num_seqs == 0) return absl::OkStatus();
  const CpuCall c = MakeCall(args);
  cpu::ParallelFor(ctx.pool, num_seqs, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) AppendSequence(c, b);
  });

  std::vector<int64_t> seq_of_row(t);  // the sequence owning each row
  for (int64_t b = 0; b < num_seqs; ++b) {
    for (int64_t r = c.cu[b]; r < c.cu[b + 1]; ++r) seq_of_row[r] = b;
  }
  const int64_t group = c.hq / c.hkv, row = c.hkv * c.dh;
  cpu::ParallelFor(ctx.pool, t * c.hq, [&](int64_t begin, int64_t end) {
    const std::span<float> w = cpu::ThreadScratch(c.capacity);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t r = task / c.hq, h = task % c.hq, b = seq_of_row[r];
      const int64_t len = c.cached[b] + (r - c.cu[b]) + 1;  // positions 0 .. cached + j
      const int64_t base = static_cast<int64_t>(c.slots[b]) * c.capacity * row + (h / group) * c.dh;
      attention_math::AttendRow(c.q + task * c.dh, c.k_cache + base, c.v_cache + base, row, len,
                                static_cast<int>(c.dh), c.scale, w.data(), c.out + task * c.dh);
    }
  });
  return absl::OkStatus();
}

}  // namespace mcserve::kernels::internal
