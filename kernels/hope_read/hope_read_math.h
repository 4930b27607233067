// HopeRead's math (hope_read.h) for one (row, head), shared by the CPU and CUDA backends: one call
// computes the whole head serially with sums in index order, so the backends agree bit for bit.
// Pure function of its arguments apart from the workspace and output it is given; any thread.
#pragma once

#include <cstdint>

#include "kernels/core/hd.h"
#include "kernels/hope_memory/hope_memory_math.h"

namespace mcserve::kernels::hope_read_math {

namespace hm = hope_memory_math;

// One (row, head): its inputs, sizes and where it writes.
struct HopeReadHead {
  const float* q_pre;   // [d] q~ of the head
  const float* window;  // the head's first channel in the window [K−1, H·d] (stride H·d), or null
  const float* conv;    // [d, K] the head's taps
  const float* w;       // [2·E·d] W2 [E, d] then W1 [d, E]
  const float* dy;      // [d] or null (forward)
  float* work;          // [3·d + 2·E] scratch: p, s, dq | z, b
  float* out;           // [d] y or dq~
  int64_t stride;       // H·d
  int d, e, k;
  HopeActivation act;
  bool query;           // q~ → conv → SiLU → L2 before the read; false: read the input itself
};

// q = L2(SiLU(p)) into s (scaled in place), p kept; returns the norm √(Σs² + eps).
MCSERVE_HD float Query(const HopeReadHead& h, float* p, float* s) {
  for (int c = 0; c < h.d; ++c) {
    float acc = 0.0f;
    for (int i = 0; i + 1 < h.k; ++i) acc += h.conv[c * h.k + i] * h.window[i * h.stride + c];
    p[c] = acc + h.conv[c * h.k + h.k - 1] * h.q_pre[c];
    s[c] = hm::Silu(p[c]);
  }
  return hm::L2Norm(s, h.d);
}

// Forward (dy null): out = y. Backward: out = dq~ (query) or ∂⟨dy, y⟩/∂x (a raw read).
MCSERVE_HD void ReadHead(const HopeReadHead& h) {
  const int d = h.d, e = h.e;
  float *p = h.work, *s = p + d, *dq = s + d, *z = dq + d, *b = z + e;
  float nrm = 1.0f;  // a raw read: s = the input, no normalisation (x / 1 is exact)
  if (h.query) {
    nrm = Query(h, p, s);
  } else {
    for (int c = 0; c < d; ++c) s[c] = h.q_pre[c];
  }
  // q_c = s_c / nrm is formed where used, so the scratch stays [3·d + 2·E].
  const float* w2 = h.w;
  const float* w1 = h.w + static_cast<int64_t>(e) * d;
  for (int r = 0; r < e; ++r) {
    float acc = 0.0f;
    for (int c = 0; c < d; ++c) acc += w2[r * d + c] * (s[c] / nrm);
    z[r] = acc;
  }
  if (h.dy == nullptr) {
    for (int j = 0; j < d; ++j) {
      float acc = 0.0f;
      for (int r = 0; r < e; ++r) acc += w1[j * e + r] * hm::Act(h.act, z[r]);
      h.out[j] = s[j] / nrm + acc;
    }
    return;
  }
  for (int r = 0; r < e; ++r) {  // b = (W1ᵀ dy) ⊙ σ'(z)
    float acc = 0.0f;
    for (int j = 0; j < d; ++j) acc += w1[j * e + r] * h.dy[j];
    b[r] = acc * hm::ActGrad(h.act, z[r]);
  }
  float sdq = 0.0f;  // ⟨s, dq⟩ with dq = dy + W2ᵀ b
  for (int c = 0; c < d; ++c) {
    float acc = h.dy[c];
    for (int r = 0; r < e; ++r) acc += w2[r * d + c] * b[r];
    dq[c] = acc;
    sdq += s[c] * acc;
  }
  if (!h.query) {
    for (int c = 0; c < d; ++c) h.out[c] = dq[c];
    return;
  }
  const float inv = 1.0f / nrm, inv3 = inv * inv * inv;
  for (int c = 0; c < d; ++c) {  // ds = dq/‖s‖ − s⟨s, dq⟩/‖s‖³; dp = ds·SiLU'(p); dq~ = dp·w_{K−1}
    const float ds = dq[c] * inv - s[c] * sdq * inv3;
    h.out[c] = ds * hm::SiluGrad(p[c]) * h.conv[c * h.k + h.k - 1];
  }
}

}  // namespace mcserve::kernels::hope_read_math
