// The random inputs of a DeepMcReadout call, shared by its CPU test (deep_memory_readout_test.cc) and
// its emulated-CUDA test (deep_memory_readout_emu_test.cc).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "random_inputs.h"

namespace mcserve::kernels::deep_case {

// Host data of one call. Page i: mem[i] [H, P] (W2 ~ U(±1)/√d, W1 ~ U(±1)/√e per head), pooled[i]
// [H, d], scale[i]. Soup: online_memory [slots, H, P], sequences of `lens` tokens in `slot_ids`.
struct Case {
  int64_t t = 0, h = 0, d = 0, x = 4;
  bool ln = false;
  std::vector<std::vector<int32_t>> lists;   // [T] pages read by each token, in list order
  std::vector<float> q, u, pool_on, online;  // [T, H, d] ×4
  std::vector<float> ln_w, ln_b;             // [H, d] (ln only)
  std::vector<std::vector<float>> mem, pooled;
  std::vector<float> scale;
  int64_t slots = 4;
  std::vector<float> online_memory;
  std::vector<int32_t> lens, slot_ids;
  int64_t e() const { return x * d; }
  int64_t p() const { return 2 * e() * d; }
};

// `heads` memories [2·e·d] each: W2 [e, d] ~ U(±1)/√d, then W1 [d, e] ~ U(±1)/√e.
inline std::vector<float> RandomWeights(int64_t heads, int64_t d, int64_t e, uint32_t seed) {
  std::vector<float> w = RandomVector(heads * 2 * e * d, seed);
  for (size_t i = 0; i < w.size(); ++i) w[i] /= static_cast<float>(std::sqrt(double(i % (2 * e * d) < e * d ? d : e)));
  return w;
}

// Token i reads page 0 and each other page with probability `density`, shuffled, except every fifth
// token (i % 5 == 2), which reads none. Soup's tokens form three sequences on slots {2, 0, 3} of 4.
inline Case RandomCase(int64_t t, int64_t h, int64_t d, int num_pages, bool ln, uint32_t seed, double density = 0.7) {
  Case c;
  c.t = t;
  c.h = h;
  c.d = d;
  c.ln = ln;
  c.q = RandomVector(t * h * d, seed + 1);
  c.u = RandomVector(t * h * d, seed + 2, -2.0f, 2.0f);
  c.pool_on = RandomVector(t * h * d, seed + 3);
  c.online = RandomVector(t * h * d, seed + 4);
  if (ln) {
    c.ln_w = RandomVector(h * d, seed + 5, 0.5f, 1.5f);
    c.ln_b = RandomVector(h * d, seed + 6, -0.2f, 0.2f);
  }
  for (int i = 0; i < num_pages; ++i) {
    c.mem.push_back(RandomWeights(h, d, c.e(), seed + 100 + i));
    c.pooled.push_back(RandomVector(h * d, seed + 200 + i));
    c.scale.push_back(RandomVector(1, seed + 300 + i, 0.5f, 1.5f)[0]);
  }
  std::mt19937 rng(seed);
  std::bernoulli_distribution take(density);
  for (int64_t i = 0; i < t; ++i) {
    std::vector<int32_t> list;
    if (i % 5 != 2 && num_pages > 0) {
      for (int p = 0; p < num_pages; ++p) {
        if (p == 0 || take(rng)) list.push_back(p);
      }
      std::shuffle(list.begin(), list.end(), rng);
    }
    c.lists.push_back(list);
  }
  c.online_memory = RandomWeights(c.slots * h, d, c.e(), seed + 7);
  c.lens = {static_cast<int32_t>(t / 3), static_cast<int32_t>(t - t / 3 - t / 4), static_cast<int32_t>(t / 4)};
  c.slot_ids = {2, 0, 3};
  return c;
}

}  // namespace mcserve::kernels::deep_case
