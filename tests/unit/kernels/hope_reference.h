// Test helper: HopeMemory in double precision, written straight from hope_memory.h's per-token
// description (not from hope_memory_math.h): every memory MLP, its factors and its update, the convs,
// the norms and the gates, token by token for each sequence and head.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "hope_case.h"

namespace mcserve::kernels::hope_reference {

using Vec = std::vector<double>;

inline double Sig(double z) { return 1.0 / (1.0 + std::exp(-z)); }

inline double Sigma(HopeActivation a, double z) {
  if (a == HopeActivation::kSilu) return z * Sig(z);
  return 0.5 * z * (1.0 + std::erf(z / std::sqrt(2.0)));
}

inline double SigmaPrime(HopeActivation a, double z) {
  if (a == HopeActivation::kSilu) return Sig(z) * (1.0 + z * (1.0 - Sig(z)));
  return 0.5 * (1.0 + std::erf(z / std::sqrt(2.0))) + z * std::exp(-0.5 * z * z) / std::sqrt(2.0 * M_PI);
}

inline double Softplus(double x) { return x > 20.0 ? x : std::log1p(std::exp(x)); }

inline Vec L2(const Vec& x) {
  double s = 0;
  for (double v : x) s += v * v;
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] / std::sqrt(s + 1e-6);
  return y;
}

// One memory of one head: W2 [E, d] at w[0], W1 [o, E] at w[E·d]; R = x (o = d) or ⟨skip, x⟩ / 0.
struct Mlp {
  int64_t d, e, o;
  const double* skip;  // [d] or null
  HopeActivation act;

  double W2(const double* w, int64_t r, int64_t c) const { return w[r * d + c]; }
  double W1(const double* w, int64_t j, int64_t r) const { return w[e * d + j * e + r]; }
  Vec R(const Vec& x) const {
    if (o == d) return x;
    double s = 0;
    if (skip != nullptr) {
      for (int64_t c = 0; c < d; ++c) s += skip[c] * x[c];
    }
    return {s};
  }
  Vec Pre(const double* w, const Vec& x) const {  // W2 x
    Vec z(e, 0.0);
    for (int64_t r = 0; r < e; ++r) {
      for (int64_t c = 0; c < d; ++c) z[r] += W2(w, r, c) * x[c];
    }
    return z;
  }
  Vec Forward(const double* w, const Vec& x) const {  // M(x; W) = R(x) + W1 σ(W2 x)
    const Vec z = Pre(w, x);
    Vec y = R(x);
    for (int64_t j = 0; j < o; ++j) {
      for (int64_t r = 0; r < e; ++r) y[j] += W1(w, j, r) * Sigma(act, z[r]);
    }
    return y;
  }

  // Step 6 for this memory: anchor A, running W (and S, or null), token features and gates.
  void Write(const double* A, double* W, double* S, const Vec& k, const Vec& v, double alpha, double eta,
             double beta, const HopeMemoryOptions& opt) const {
    const double s = opt.grad_scale;
    const Vec vhat = Forward(A, v), z = Pre(A, k);
    Vec a(e), e_(o);
    for (int64_t r = 0; r < e; ++r) a[r] = Sigma(act, z[r]);
    const Vec rk = R(k);
    for (int64_t j = 0; j < o; ++j) {
      e_[j] = rk[j] - vhat[j];
      for (int64_t r = 0; r < e; ++r) e_[j] += W1(A, j, r) * a[r];
    }
    Vec g2row(e);  // s·(A1ᵀ e) ⊙ σ'(z)
    for (int64_t r = 0; r < e; ++r) {
      double acc = 0;
      for (int64_t j = 0; j < o; ++j) acc += W1(A, j, r) * e_[j];
      g2row[r] = s * acc * SigmaPrime(act, z[r]);
    }
    const Vec w2k = Pre(W, k);
    double an = 0;
    for (double x : a) an += x * x;
    Vec ahat(e), w1a(o, 0.0);
    for (int64_t r = 0; r < e; ++r) ahat[r] = a[r] / std::sqrt(an + 1e-12);
    for (int64_t j = 0; j < o; ++j) {
      for (int64_t r = 0; r < e; ++r) w1a[j] += W1(W, j, r) * ahat[r];
    }
    auto apply = [&](int64_t i, double decayed, double g) {
      if (S == nullptr) {
        W[i] = decayed - eta * g;
      } else {
        S[i] = beta * S[i] - eta * g;
        W[i] = decayed + S[i];
      }
    };
    for (int64_t r = 0; r < e; ++r) {
      for (int64_t c = 0; c < d; ++c) apply(r * d + c, alpha * W[r * d + c] - eta * w2k[r] * k[c], g2row[r] * k[c]);
    }
    for (int64_t j = 0; j < o; ++j) {
      for (int64_t r = 0; r < e; ++r) {
        const int64_t i = e * d + j * e + r;
        double decayed = alpha * W[i];
        if (opt.w1_rule == HopeW1Rule::kDgdHidden) decayed -= eta * w1a[j] * ahat[r];
        apply(i, decayed, s * e_[j] * a[r]);
      }
    }
  }
};

// The pool in double.
struct DPool {
  Vec memory, mem_anchor, momentum, fast, fast_anchor, fast_momentum, conv_q, conv_k, conv_v;
  std::vector<int64_t> pos;
};

inline Vec ToD(const std::vector<float>& v) { return Vec(v.begin(), v.end()); }
inline std::vector<float> ToF(const Vec& v) {
  std::vector<float> f(v.size());
  for (size_t i = 0; i < v.size(); ++i) f[i] = static_cast<float>(v[i]);
  return f;
}

// SiLU(conv z) of channel ch with window win [K−1] (stride hd, oldest first), taps w [H·d, 1, K].
inline double Conv(const std::vector<float>& w, double* win, int64_t hd, int64_t K, int64_t ch, double z) {
  double y = w[ch * K + K - 1] * z;  // j = 0: the current input
  for (int64_t j = 1; j < K; ++j) y += w[ch * K + K - 1 - j] * win[(K - 1 - j) * hd];  // z_{t−j}
  for (int64_t i = 0; i + 1 < K - 1; ++i) win[i * hd] = win[(i + 1) * hd];
  if (K > 1) win[(K - 2) * hd] = z;
  return y * Sig(y);
}

// One token of sequence slot `slot`, head h, 0-based position pos; returns y [d]. Counts a binding
// clamp in *clamped.
inline Vec Token(const hope_case::Case& c, DPool& p, const hope_case::Inputs& in, int64_t row, int64_t slot,
                 int64_t h, int64_t pos, const Vec& skip, int64_t* clamped) {
  const HopeMemoryOptions& o = c.opt;
  const int64_t d = c.d(), e = c.e(), H = c.heads, K = c.k(), pm = c.pm(), pf = c.pf();
  double* mem = &p.memory[(slot * H + h) * pm];
  double* mem_a = &p.mem_anchor[(slot * H + h) * pm];
  double* fast = &p.fast[(slot * H + h) * pf];
  double* fast_a = &p.fast_anchor[(slot * H + h) * pf];
  if (pos % o.chunk_size_other == 0) std::copy(fast, fast + pf, fast_a);
  if (pos % o.chunk_size_mem == 0) std::copy(mem, mem + pm, mem_a);
  const double* sk = c.with_skip ? skip.data() : nullptr;
  const Mlp big{d, e, d, nullptr, o.activation};
  const Mlp eta_m{d, e, 1, sk != nullptr ? sk + h * d : nullptr, o.activation};
  const Mlp alpha_m{d, e, 1, sk != nullptr ? sk + (H + h) * d : nullptr, o.activation};
  const int64_t ob[5] = {0, 2 * e * d, 4 * e * d, 5 * e * d + e, 6 * e * d + 2 * e};  // k, v, eta, alpha, q
  Vec x(d), qt(d);
  for (int64_t c2 = 0; c2 < d; ++c2) {
    x[c2] = in.x[(row * H + h) * d + c2];
    if (!o.adaptive_q) qt[c2] = in.q_pre[(row * H + h) * d + c2];
  }
  Vec kt = big.Forward(fast_a + ob[0], x), vt = big.Forward(fast_a + ob[1], x);
  const double eta_t = eta_m.Forward(fast_a + ob[2], x)[0], alpha_t = alpha_m.Forward(fast_a + ob[3], x)[0];
  if (o.adaptive_q) qt = big.Forward(fast_a + ob[4], x);
  const int64_t hd = H * d, wo = slot * (K - 1) * hd + h * d;
  Vec q(d), k(d), v(d);
  for (int64_t c2 = 0; c2 < d; ++c2) {
    const int64_t ch = h * d + c2;
    q[c2] = Conv(c.q_conv, K > 1 ? &p.conv_q[wo + c2] : nullptr, hd, K, ch, qt[c2]);
    k[c2] = Conv(c.k_conv, K > 1 ? &p.conv_k[wo + c2] : nullptr, hd, K, ch, kt[c2]);
    v[c2] = Conv(c.v_conv, K > 1 ? &p.conv_v[wo + c2] : nullptr, hd, K, ch, vt[c2]);
  }
  q = L2(q);
  k = L2(k);
  const double alpha = Sig(alpha_t);
  double eta = o.eta_scale * (o.eta_activation == HopeEtaActivation::kSigmoid ? Sig(eta_t) : Softplus(eta_t));
  if (o.eta_clamp && eta > 1.0 + alpha) {
    eta = 1.0 + alpha;
    ++*clamped;
  }
  const double beta = o.momentum == HopeMomentum::kData ? in.beta[row * H + h] : o.momentum_beta;
  Vec y;
  if (o.read_anchor) {
    y = big.Forward(mem_a, q);
  } else if (!o.read_after_write) {
    y = big.Forward(mem, q);
  }
  const bool mom = c.has_momentum();
  double* fm = mom ? &p.fast_momentum[(slot * H + h) * pf] : nullptr;
  const Mlp* mlps[5] = {&big, &big, &eta_m, &alpha_m, &big};
  for (int m = 0; m < (o.adaptive_q ? 5 : 4); ++m) {
    mlps[m]->Write(fast_a + ob[m], fast + ob[m], mom ? fm + ob[m] : nullptr, k, v, alpha, eta, beta, o);
  }
  big.Write(mem_a, mem, mom ? &p.momentum[(slot * H + h) * pm] : nullptr, k, v, alpha, eta, beta, o);
  if (!o.read_anchor && o.read_after_write) y = big.Forward(mem, q);
  return y;
}

// The calls of hope_case::RunHope in double: outputs and final pool, as floats.
inline hope_case::Result Run(const hope_case::Case& c, const std::vector<hope_case::Call>& calls) {
  const hope_case::Pool& f = c.pool;
  DPool p{ToD(f.memory), ToD(f.mem_anchor), ToD(f.momentum), ToD(f.fast), ToD(f.fast_anchor),
          ToD(f.fast_momentum), ToD(f.conv_q), ToD(f.conv_k), ToD(f.conv_v), f.pos};
  const Vec skip = ToD(c.skip);
  hope_case::Result r;
  for (const hope_case::Call& call : calls) {
    const hope_case::Inputs in = hope_case::CallInputs(c, call);
    std::vector<float> out(hope_case::Rows(call) * c.heads * c.d());
    int64_t row = 0;
    for (size_t b = 0; b < call.lens.size(); ++b) {
      const int64_t slot = call.slots[b];
      for (int32_t j = 0; j < call.lens[b]; ++j, ++row) {
        for (int64_t h = 0; h < c.heads; ++h) {
          const Vec y = Token(c, p, in, row, slot, h, p.pos[slot] + j, skip, &r.clamped);
          for (int64_t i = 0; i < c.d(); ++i) out[(row * c.heads + h) * c.d() + i] = static_cast<float>(y[i]);
        }
      }
      p.pos[slot] += call.lens[b];
    }
    r.out.insert(r.out.end(), out.begin(), out.end());
  }
  r.pool = {ToF(p.memory), ToF(p.mem_anchor), ToF(p.momentum), ToF(p.fast), ToF(p.fast_anchor),
            ToF(p.fast_momentum), ToF(p.conv_q), ToF(p.conv_k), ToF(p.conv_v), p.pos};
  return r;
}

}  // namespace mcserve::kernels::hope_reference
