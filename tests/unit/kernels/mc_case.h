// Test helpers for the Memory Caching read-out ops (McReadout, McRoute): random host data of one
// call with per-token page lists, its CSR form, and runners of McRoute / McReadout's top-k softmax
// on any device.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "kernels/core/tensor.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/mc_readout/mc_readout.h"
#include "kernels/mc_route/mc_route.h"
#include "random_inputs.h"
#include "route_selection.h"

namespace mcserve::kernels {

// Host data of one call. Page i: mem[i] [Hs, K, V], pooled[i] [Hs, K].
struct Case {
  int64_t t = 0, hs = 0, k = 0, v = 0;
  std::vector<std::vector<int32_t>> lists;   // [T] page indices read by each token, in list order
  std::vector<float> q, u, pool_on, online;  // [T, Hs, K] ×3, [T, Hs, V]
  std::vector<std::vector<float>> mem, pooled;
};

// Random data; token i reads page 0 and each other page with probability `density`, shuffled, except
// every fifth token (i % 5 == 2), which reads none.
inline Case RandomCase(int64_t t, int64_t hs, int64_t k, int64_t v, int num_pages, uint32_t seed,
                       double density = 0.6) {
  Case c;
  c.t = t;
  c.hs = hs;
  c.k = k;
  c.v = v;
  c.q = RandomVector(t * hs * k, seed + 1);
  c.u = RandomVector(t * hs * k, seed + 2, -2.0f, 2.0f);
  c.pool_on = RandomVector(t * hs * k, seed + 3);
  c.online = RandomVector(t * hs * v, seed + 4);
  for (int i = 0; i < num_pages; ++i) {
    c.mem.push_back(RandomVector(hs * k * v, seed + 100 + i));
    c.pooled.push_back(RandomVector(hs * k, seed + 200 + i));
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
  return c;
}

// The lists in CSR form: offsets [T + 1], pages [P].
struct Csr {
  std::vector<int32_t> offsets, pages;
};
inline Csr ToCsr(const std::vector<std::vector<int32_t>>& lists) {
  Csr csr{{0}, {}};
  for (const auto& list : lists) {
    csr.pages.insert(csr.pages.end(), list.begin(), list.end());
    csr.offsets.push_back(static_cast<int32_t>(csr.pages.size()));
  }
  return csr;
}

// Tensors and args of one McRoute call on `dev`; `selected` starts as 777 everywhere (not a page).
struct RouteInputs {
  Tensor u, offsets, token_pages, selected;
  std::vector<Tensor> pooled;
  std::vector<const Tensor*> pooled_ptrs;
  McRouteArgs args;

  RouteInputs(const Case& c, int top_k, Device dev) {
    u = *Tensor::FromHost(c.u, {c.t, c.hs, c.k}, dev);
    const Csr csr = ToCsr(c.lists);
    offsets = *Tensor::FromHostI32(csr.offsets, {c.t + 1}, dev);
    token_pages = *Tensor::FromHostI32(csr.pages, {static_cast<int64_t>(csr.pages.size())}, dev);
    const int64_t n = c.t * c.hs * std::max(top_k, 0);
    selected = *Tensor::FromHostI32(std::vector<int32_t>(n, 777), {c.t, c.hs, top_k}, dev);
    for (const auto& p : c.pooled) pooled.push_back(*Tensor::FromHost(p, {c.hs, c.k}, dev));
    for (const Tensor& p : pooled) pooled_ptrs.push_back(&p);
    args.top_k = top_k;
    args.u = &u;
    args.pooled_keys = pooled_ptrs;
    args.token_page_offsets = &offsets;
    args.token_pages = &token_pages;
    args.selected = &selected;
  }
  RouteInputs(const RouteInputs&) = delete;
  RouteInputs& operator=(const RouteInputs&) = delete;
};

struct RouteResult {
  absl::Status status;
  std::vector<int32_t> selected;  // [T, Hs, top_k]
};

// McRoute of the case on `dev` (with `pool` on the CPU).
inline RouteResult RunRoute(const Case& c, int top_k, Device dev, cpu::ThreadPool* pool = nullptr) {
  RouteInputs in(c, top_k, dev);
  RouteResult r;
  r.status = McRoute(Context{.device = dev, .pool = pool}, in.args);
  r.selected = *in.selected.ToHostI32();
  return r;
}

// The case with each token's list reduced to the pages selected for any of its heads (selected
// [T, Hs, top_k], −1 padded), in the original list order.
inline Case ReduceToSelection(const Case& c, const std::vector<int32_t>& selected, int top_k) {
  Case reduced = c;
  reduced.lists = ReduceListsToSelection(c.lists, selected, c.hs, top_k);
  return reduced;
}

struct ReadoutResult {
  absl::Status status;
  std::vector<float> out;  // [T, Hs, V]
};

// McReadout with kTopKSoftmax of the case on `dev` (with `pool` on the CPU).
inline ReadoutResult RunTopKReadout(const Case& c, int top_k, Device dev, cpu::ThreadPool* pool = nullptr) {
  Tensor q = *Tensor::FromHost(c.q, {c.t, c.hs, c.k}, dev);
  Tensor u = *Tensor::FromHost(c.u, {c.t, c.hs, c.k}, dev);
  Tensor pool_on = *Tensor::FromHost(c.pool_on, {c.t, c.hs, c.k}, dev);
  Tensor online = *Tensor::FromHost(c.online, {c.t, c.hs, c.v}, dev);
  Tensor out = *Tensor::Zeros(DType::kF32, {c.t, c.hs, c.v}, dev);
  const Csr csr = ToCsr(c.lists);
  Tensor offsets = *Tensor::FromHostI32(csr.offsets, {c.t + 1}, dev);
  Tensor token_pages = *Tensor::FromHostI32(csr.pages, {static_cast<int64_t>(csr.pages.size())}, dev);
  std::vector<Tensor> mem, pooled;
  for (size_t i = 0; i < c.mem.size(); ++i) {
    mem.push_back(*Tensor::FromHost(c.mem[i], {c.hs, c.k, c.v}, dev));
    pooled.push_back(*Tensor::FromHost(c.pooled[i], {c.hs, c.k}, dev));
  }
  std::vector<McPage> pages;
  for (size_t i = 0; i < mem.size(); ++i) pages.push_back({&mem[i], &pooled[i]});
  McReadoutArgs args;
  args.combine = McCombine::kTopKSoftmax;
  args.top_k = top_k;
  args.q = &q;
  args.u = &u;
  args.online_pool = &pool_on;
  args.online = &online;
  args.pages = pages;
  args.token_page_offsets = &offsets;
  args.token_pages = &token_pages;
  args.out = &out;
  ReadoutResult r;
  r.status = McReadout(Context{.device = dev, .pool = pool}, args);
  r.out = *out.ToHostF32();
  return r;
}

}  // namespace mcserve::kernels
