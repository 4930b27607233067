// CPU AssocMemory: the read in parallel over rows; the write in two passes, first the recall terms
// (delta, γ) of every row from the old state, in parallel over rows, then the update in parallel
// over (sequence, feature) rows of A. Sums run in the order of assoc_memory_math.h's (index order),
// written row-wise so the inner loops run over contiguous columns.
#include <vector>

#include "kernels/assoc_memory/assoc_memory.h"
#include "kernels/assoc_memory/assoc_memory_math.h"
#include "kernels/core/tensor_data.h"
#include "kernels/cpu/scratch.h"
#include "kernels/cpu/thread_pool.h"

namespace mcserve::kernels::internal {
namespace {

// The sequence owning each of the t rows (cu [B + 1]).
std::vector<int64_t> SequenceOfRow(const int32_t* cu, int64_t num_seqs, int64_t t) {
  std::vector<int64_t> seq(t);
  for (int64_t b = 0; b < num_seqs; ++b) {
    for (int64_t r = cu[b]; r < cu[b + 1]; ++r) seq[r] = b;
  }
  return seq;
}

// acc [d] = f · A for f [nf], A [nf, d] (Σ_f in order, as assoc_math::MatColumn).
void RowTimesMatrix(const float* f, const float* a, int64_t nf, int64_t d, float* acc) {
  for (int64_t c = 0; c < d; ++c) acc[c] = 0.0f;
  for (int64_t i = 0; i < nf; ++i) {
    const float fi = f[i];
    const float* ai = a + i * d;
    for (int64_t c = 0; c < d; ++c) acc[c] += fi * ai[c];
  }
}

}  // namespace

absl::Status AssocReadCpu(const Context& ctx, const AssocReadArgs& args) {
  const int64_t t = args.fq->dim(0), nf = args.a->dim(1), d = args.a->dim(2);
  const int64_t num_seqs = args.layout.slot_ids->dim(0);
  if (t == 0 || num_seqs == 0) return absl::OkStatus();
  const int32_t* cu = Data<int32_t>(*args.layout.cu_seqlens);
  const int32_t* slots = Data<int32_t>(*args.layout.slot_ids);
  const std::vector<int64_t> seq = SequenceOfRow(cu, num_seqs, t);
  const float *fq = Data<float>(*args.fq), *a = Data<float>(*args.a), *z = Data<float>(*args.z);
  float* h = Data<float>(*args.h);
  cpu::ParallelFor(ctx.pool, t, [&](int64_t begin, int64_t end) {
    const std::span<float> acc = cpu::ThreadScratch(d);
    for (int64_t r = begin; r < end; ++r) {
      const int64_t s = slots[seq[r]];
      const float* fr = fq + r * nf;
      const float den = assoc_math::Denominator(fr, z + s * nf, nf, args.eps);
      RowTimesMatrix(fr, a + s * nf * d, nf, d, acc.data());
      for (int64_t c = 0; c < d; ++c) h[r * d + c] += acc[c] / den;
    }
  });
  return absl::OkStatus();
}

absl::Status AssocWriteCpu(const Context& ctx, const AssocWriteArgs& args) {
  const int64_t t = args.fk->dim(0), nf = args.a->dim(1), d = args.a->dim(2);
  const int64_t num_seqs = args.layout.slot_ids->dim(0);
  if (t == 0 || num_seqs == 0) return absl::OkStatus();
  const int32_t* cu = Data<int32_t>(*args.layout.cu_seqlens);
  const int32_t* slots = Data<int32_t>(*args.layout.slot_ids);
  const int32_t* first = Data<int32_t>(*args.first);
  const std::vector<int64_t> seq = SequenceOfRow(cu, num_seqs, t);
  const float *fk = Data<float>(*args.fk), *vn = Data<float>(*args.vn), *beta = Data<float>(*args.beta);
  float *delta = Data<float>(*args.delta), *gamma = Data<float>(*args.gamma);
  float *a = Data<float>(*args.a), *z = Data<float>(*args.z);
  cpu::ParallelFor(ctx.pool, t, [&](int64_t begin, int64_t end) {  // recall terms, old state
    const std::span<float> vbar = cpu::ThreadScratch(d);
    for (int64_t r = begin; r < end; ++r) {
      const int64_t s = slots[seq[r]];
      const float* fr = fk + r * nf;
      gamma[r] = 1.0f;
      if (first[seq[r]] == 0) {
        const float den = assoc_math::Denominator(fr, z + s * nf, nf, args.eps);
        RowTimesMatrix(fr, a + s * nf * d, nf, d, vbar.data());
        for (int64_t c = 0; c < d; ++c) vbar[c] /= den;
        if (args.correction) gamma[r] = assoc_math::Gamma(fr, nf, den, args.eps);
      } else {
        for (int64_t c = 0; c < d; ++c) vbar[c] = 0.0f;
      }
      for (int64_t c = 0; c < d; ++c) delta[r * d + c] = beta[r] * (vn[r * d + c] - vbar[c]);
    }
  });
  cpu::ParallelFor(ctx.pool, num_seqs * nf, [&](int64_t begin, int64_t end) {  // A += fkᵀ delta, z += γ fk
    const std::span<float> acc = cpu::ThreadScratch(d);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / nf, f = task % nf, s = slots[b], n = cu[b + 1] - cu[b];
      if (n == 0) continue;
      const float* fkb = fk + cu[b] * nf;
      const float* db = delta + cu[b] * d;
      for (int64_t c = 0; c < d; ++c) acc[c] = 0.0f;
      for (int64_t i = 0; i < n; ++i) {
        const float fi = fkb[i * nf + f];
        for (int64_t c = 0; c < d; ++c) acc[c] += fi * db[i * d + c];
      }
      float* row = a + (s * nf + f) * d;
      for (int64_t c = 0; c < d; ++c) row[c] += acc[c];
      z[s * nf + f] += assoc_math::UpdateZ(fkb, gamma + cu[b], n, nf, f);
    }
  });
  return absl::OkStatus();
}

}  // namespace mcserve::kernels::internal
