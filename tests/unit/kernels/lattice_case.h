// Test helper for LatticeMemory: a random case (unit-norm slots in a state pool), a run of chained
// varlen calls on one device, and a plain double-precision host reference of the recurrence.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "kernels/lattice_memory/lattice_memory.h"
#include "random_inputs.h"

namespace mcserve::kernels {

struct LatticeCall {
  std::vector<int32_t> lens, slots;
  uint32_t seed;
};

struct LatticeCase {
  LatticeMemoryVariant variant = LatticeMemoryVariant::kDec;
  bool analytic = false, normalized = false, forget = true;
  int64_t heads = 2, m = 6, d = 9, num_slots = 4;
  std::vector<float> state;  // [num_slots, heads, m, d], unit-norm rows

  void Randomize(uint32_t seed) {
    state = RandomVector(num_slots * heads * m * d, seed);
    for (int64_t r = 0; r < num_slots * heads * m; ++r) {
      double n = 0;
      for (int64_t j = 0; j < d; ++j) n += double(state[r * d + j]) * state[r * d + j];
      for (int64_t j = 0; j < d; ++j) state[r * d + j] = static_cast<float>(state[r * d + j] / std::sqrt(n));
    }
  }
};

// One call's inputs: q, k [T, H, m], v [T, H, d], gamma, mu [T, H].
struct LatticeInputs {
  std::vector<float> q, k, v, gamma, mu;
};

inline LatticeInputs MakeLatticeInputs(const LatticeCase& c, int64_t t, uint32_t s) {
  return {RandomVector(t * c.heads * c.m, s), RandomVector(t * c.heads * c.m, s + 1),
          RandomVector(t * c.heads * c.d, s + 2), RandomVector(t * c.heads, s + 3, 0.05f, 0.95f),
          RandomVector(t * c.heads, s + 4, 0.5f, 1.0f)};
}

struct LatticeResult {
  absl::Status status;
  std::vector<float> out, state;
};

// Runs `calls` in order through one state pool on `dev`: concatenated outputs and the final pool.
inline LatticeResult RunLattice(const LatticeCase& c, const std::vector<LatticeCall>& calls, Device dev) {
  Tensor state = *Tensor::FromHost(c.state, {c.num_slots, c.heads, c.m, c.d}, dev);
  const Context ctx{.device = dev};
  LatticeResult r;
  for (const LatticeCall& call : calls) {
    std::vector<int32_t> cu = {0};
    for (int32_t n : call.lens) cu.push_back(cu.back() + n);
    const int64_t t = cu.back(), nb = static_cast<int64_t>(call.lens.size());
    const LatticeInputs in = MakeLatticeInputs(c, t, call.seed);
    Tensor q = *Tensor::FromHost(in.q, {t, c.heads, c.m}, dev);
    Tensor k = *Tensor::FromHost(in.k, {t, c.heads, c.m}, dev);
    Tensor v = *Tensor::FromHost(in.v, {t, c.heads, c.d}, dev);
    Tensor gamma = *Tensor::FromHost(in.gamma, {t, c.heads}, dev);
    Tensor mu = *Tensor::FromHost(in.mu, {t, c.heads}, dev);
    Tensor out = *Tensor::Zeros(DType::kF32, {t, c.heads, c.d}, dev);
    Tensor cu_t = *Tensor::FromHostI32(cu, {nb + 1}, dev);
    Tensor slot_t = *Tensor::FromHostI32(call.slots, {nb}, dev);
    r.status = LatticeMemory(ctx, {.variant = c.variant, .analytic_renorm = c.analytic,
                                   .normalized_readout = c.normalized, .q = &q, .k = &k, .v = &v, .gamma = &gamma,
                                   .mu = c.forget ? &mu : nullptr,
                                   .layout = {.cu_seqlens = &cu_t, .slot_ids = &slot_t}, .state = &state,
                                   .out = &out});
    if (!r.status.ok()) return r;
    const std::vector<float> o = *out.ToHostF32();
    r.out.insert(r.out.end(), o.begin(), o.end());
  }
  r.state = *state.ToHostF32();
  return r;
}

// The recurrence in double, written from docs/model-format.md: one token of one head.
// M [m][d] in/out, returns o [d].
inline std::vector<double> LatticeReferenceStep(std::vector<std::vector<double>>& M, const float* q, const float* k,
                                                const float* v, double gamma, double mu, const LatticeCase& c) {
  const int64_t m = c.m, d = c.d;
  std::vector<std::vector<double>> phi(m, std::vector<double>(d));
  std::vector<double> n(m);
  for (int64_t i = 0; i < m; ++i) {
    double s = 0;
    for (double x : M[i]) s += x * x;
    n[i] = std::sqrt(s);
    for (int64_t j = 0; j < d; ++j) phi[i][j] = M[i][j] / n[i];
  }
  std::vector<double> h(d), coef(m);
  for (int64_t j = 0; j < d; ++j) {
    if (c.variant == LatticeMemoryVariant::kDec) {
      double s = -v[j];
      for (int64_t i = 0; i < m; ++i) s += k[i] * phi[i][j];
      h[j] = s;
    } else {
      h[j] = c.variant == LatticeMemoryVariant::kEnc ? v[j] : -v[j];
    }
  }
  for (int64_t i = 0; i < m; ++i) {
    double pv = 0;
    for (int64_t j = 0; j < d; ++j) pv += phi[i][j] * v[j];
    coef[i] = c.variant == LatticeMemoryVariant::kEnc ? pv - k[i] : k[i];
  }
  double h2 = 0;
  for (double x : h) h2 += x * x;
  for (int64_t i = 0; i < m; ++i) {
    double p = 0;
    for (int64_t j = 0; j < d; ++j) p += phi[i][j] * h[j];
    std::vector<double> u(d);
    double u2 = 0, delta2 = 0;
    for (int64_t j = 0; j < d; ++j) {
      const double delta = -gamma * coef[i] * (h[j] - p * phi[i][j]) / n[i];
      u[j] = mu * M[i][j] + delta;
      u2 += u[j] * u[j];
      delta2 += delta * delta;
    }
    const double norm2 = c.analytic ? mu * mu * n[i] * n[i] + delta2 : u2;
    for (int64_t j = 0; j < d; ++j) M[i][j] = u[j] / std::sqrt(norm2);
  }
  std::vector<double> o(d, 0.0);
  for (int64_t i = 0; i < m; ++i) {
    double s = 0;
    for (double x : M[i]) s += x * x;
    const double scale = c.normalized ? 1.0 / std::sqrt(s) : 1.0;
    for (int64_t j = 0; j < d; ++j) o[j] += q[i] * M[i][j] * scale;
  }
  return o;
}

}  // namespace mcserve::kernels
