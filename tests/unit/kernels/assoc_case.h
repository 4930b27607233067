// Shared inputs of the AssocMemory tests: a varlen batch on scattered slots (one empty sequence),
// random φ rows (non-negative, as DPFP's are), a naive double reference of the read and the write
// (assoc_memory.h's formulas), and a runner of read → write → read on any device.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/status_macros.h"
#include "kernels/assoc_memory/assoc_memory.h"
#include "kernels/core/tensor.h"
#include "random_inputs.h"

namespace mcserve::kernels {

struct AssocCase {
  int64_t nf = 12, d = 10, num_slots = 4;
  std::vector<int32_t> lens = {3, 0, 2, 1}, slots = {2, 0, 3, 1}, first = {0, 1, 1, 0};
  bool correction = true;
  std::vector<float> fq, fk, vn, beta, a, z;  // [T, F], [T, F], [T, D], [T], [slots, F, D], [slots, F]

  int64_t rows() const {
    int64_t t = 0;
    for (int32_t n : lens) t += n;
    return t;
  }
  std::vector<int32_t> cu() const {
    std::vector<int32_t> c = {0};
    for (int32_t n : lens) c.push_back(c.back() + n);
    return c;
  }
  void Randomize(uint32_t seed) {
    const int64_t t = rows();
    fq = RandomVector(t * nf, seed, 0.0f, 1.0f);
    fk = RandomVector(t * nf, seed + 1, 0.0f, 1.0f);
    vn = RandomVector(t * d, seed + 2);
    beta = RandomVector(t, seed + 3, 0.0f, 1.0f);
    a = RandomVector(num_slots * nf * d, seed + 4);
    z = RandomVector(num_slots * nf, seed + 5, 0.0f, 2.0f);
    // a few sparse key rows so that γ hits both clip ends
    for (int64_t f = 0; f < nf; ++f) fk[f] = f == 0 ? 3.0f : 0.0f;
  }
};

// The op's results: h after the read, (A, z, delta, gamma) after the write.
struct AssocResult {
  std::vector<float> h, a, z, delta, gamma;
};

// Double reference of AssocRead then AssocWrite on c (h starts at vn).
inline AssocResult AssocReference(const AssocCase& c) {
  const std::vector<int32_t> cu = c.cu();
  AssocResult r{.h = c.vn, .a = c.a, .z = c.z, .delta = std::vector<float>(c.rows() * c.d),
                .gamma = std::vector<float>(c.rows())};
  const double eps = kAssocMemoryEps;
  for (size_t b = 0; b < c.lens.size(); ++b) {
    const int64_t s = c.slots[b];
    const float* A = c.a.data() + s * c.nf * c.d;
    const float* Z = c.z.data() + s * c.nf;
    std::vector<double> upd_a(c.nf * c.d, 0.0), upd_z(c.nf, 0.0);
    for (int64_t i = cu[b]; i < cu[b + 1]; ++i) {
      double den_q = eps, den_k = eps, norm = eps;
      for (int64_t f = 0; f < c.nf; ++f) {
        den_q += double(c.fq[i * c.nf + f]) * Z[f];
        den_k += double(c.fk[i * c.nf + f]) * Z[f];
        norm += double(c.fk[i * c.nf + f]) * c.fk[i * c.nf + f];
      }
      double gamma = c.first[b] || !c.correction ? 1.0 : std::clamp(1.0 - den_k / norm, 0.0, 1.0);
      r.gamma[i] = static_cast<float>(gamma);
      for (int64_t col = 0; col < c.d; ++col) {
        double num_q = 0.0, num_k = 0.0;
        for (int64_t f = 0; f < c.nf; ++f) {
          num_q += double(c.fq[i * c.nf + f]) * A[f * c.d + col];
          num_k += double(c.fk[i * c.nf + f]) * A[f * c.d + col];
        }
        r.h[i * c.d + col] = static_cast<float>(c.vn[i * c.d + col] + num_q / den_q);
        const double vbar = c.first[b] ? 0.0 : num_k / den_k;
        const double delta = c.beta[i] * (c.vn[i * c.d + col] - vbar);
        r.delta[i * c.d + col] = static_cast<float>(delta);
        for (int64_t f = 0; f < c.nf; ++f) upd_a[f * c.d + col] += c.fk[i * c.nf + f] * delta;
      }
      for (int64_t f = 0; f < c.nf; ++f) upd_z[f] += gamma * c.fk[i * c.nf + f];
    }
    for (int64_t e = 0; e < c.nf * c.d; ++e) r.a[s * c.nf * c.d + e] = static_cast<float>(A[e] + upd_a[e]);
    for (int64_t f = 0; f < c.nf; ++f) r.z[s * c.nf + f] = static_cast<float>(Z[f] + upd_z[f]);
  }
  return r;
}

// AssocRead (h = vn + read) then AssocWrite of c on device d; the status of the first failure.
inline absl::StatusOr<AssocResult> RunAssoc(const AssocCase& c, Device d) {
  const int64_t t = c.rows(), b = static_cast<int64_t>(c.lens.size());
  MCSERVE_ASSIGN_OR_RETURN(Tensor fq, Tensor::FromHost(c.fq, {t, c.nf}, d));
  MCSERVE_ASSIGN_OR_RETURN(Tensor fk, Tensor::FromHost(c.fk, {t, c.nf}, d));
  MCSERVE_ASSIGN_OR_RETURN(Tensor vn, Tensor::FromHost(c.vn, {t, c.d}, d));
  MCSERVE_ASSIGN_OR_RETURN(Tensor h, Tensor::FromHost(c.vn, {t, c.d}, d));
  MCSERVE_ASSIGN_OR_RETURN(Tensor beta, Tensor::FromHost(c.beta, {t}, d));
  MCSERVE_ASSIGN_OR_RETURN(Tensor a, Tensor::FromHost(c.a, {c.num_slots, c.nf, c.d}, d));
  MCSERVE_ASSIGN_OR_RETURN(Tensor z, Tensor::FromHost(c.z, {c.num_slots, c.nf}, d));
  MCSERVE_ASSIGN_OR_RETURN(Tensor cu, Tensor::FromHostI32(c.cu(), {b + 1}, d));
  MCSERVE_ASSIGN_OR_RETURN(Tensor slots, Tensor::FromHostI32(c.slots, {b}, d));
  MCSERVE_ASSIGN_OR_RETURN(Tensor first, Tensor::FromHostI32(c.first, {b}, d));
  MCSERVE_ASSIGN_OR_RETURN(Tensor delta, Tensor::Zeros(DType::kF32, {t, c.d}, d));
  MCSERVE_ASSIGN_OR_RETURN(Tensor gamma, Tensor::Zeros(DType::kF32, {t}, d));
  const Context ctx{.device = d};
  const BatchLayout layout{.cu_seqlens = &cu, .slot_ids = &slots};
  MCSERVE_RETURN_IF_ERROR(AssocRead(ctx, {.fq = &fq, .layout = layout, .a = &a, .z = &z, .h = &h}));
  MCSERVE_RETURN_IF_ERROR(AssocWrite(ctx, {.fk = &fk, .vn = &vn, .beta = &beta, .first = &first,
                                           .correction = c.correction, .layout = layout, .delta = &delta,
                                           .gamma = &gamma, .a = &a, .z = &z}));
  AssocResult r;
  MCSERVE_ASSIGN_OR_RETURN(r.h, h.ToHostF32());
  MCSERVE_ASSIGN_OR_RETURN(r.a, a.ToHostF32());
  MCSERVE_ASSIGN_OR_RETURN(r.z, z.ToHostF32());
  MCSERVE_ASSIGN_OR_RETURN(r.delta, delta.ToHostF32());
  MCSERVE_ASSIGN_OR_RETURN(r.gamma, gamma.ToHostF32());
  return r;
}

}  // namespace mcserve::kernels
