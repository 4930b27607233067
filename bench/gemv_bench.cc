// The decode GEMVs alone: a batch-m step's projections through kernels::Linear / LinearGroup, layer
// after layer, then the LM head, with the bench model's shapes (hidden 256, intermediate 768, vocab
// 4096: q/k/v/b/a/g as one group, o, gate/up as one group, down), weights in a HostArena as the engine
// loads them. Reports the weight bytes read per second, to set beside cache_read_bench's read rate over
// the same bytes: the GEMV kernel's own efficiency, without the serial ops and hand-offs between the
// loops of a decode step, and steadier than a decode A/B on a noisy machine. BM_FmaRate is the other
// ceiling: 256-bit FMAs a second per thread (the AVX2 BF16 GEMV spends one per 8 weights, 16 bytes;
// the F32 one per 32 bytes).
// Google Benchmark; see bench/README.md.
//     build/bench/gemv_bench --benchmark_filter='BM_DecodeGemvs/bf16:1/layers:4/m:1/threads:1|BM_FmaRate'
#include <immintrin.h>

#include <cstdint>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "benchmark/benchmark.h"
#include "kernels/core/host_arena.h"
#include "kernels/core/tensor.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/linear/linear.h"

namespace mcserve::kernels {
namespace {

constexpr int64_t kHidden = 256, kIntermediate = 768, kHeads = 4, kVocab = 4096;

// A random [n, k] weight of `dtype` (F32 or BF16), copied into `arena`.
Tensor RandomWeight(HostArena& arena, DType dtype, int64_t n, int64_t k, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-0.1f, 0.1f);
  std::vector<float> values(n * k);
  for (float& v : values) v = u(rng);
  Tensor f32 = Tensor::FromHost(values, {n, k}, Device::kCpu).value();
  if (dtype == DType::kF32) return arena.Copy(f32).value();
  std::vector<uint16_t> bits(values.size());
  for (size_t i = 0; i < values.size(); ++i) bits[i] = F32ToBf16(values[i]);
  auto owner = std::make_shared<std::vector<uint16_t>>(std::move(bits));
  return arena.Copy(Tensor::WrapHost(owner->data(), DType::kBF16, {n, k}, owner)).value();
}

// One layer's projections, each weight [n_i, k_i] with its output [m, n_i], and the two groups' items
// (built once, outside the timed loop).
struct Layer {
  std::vector<Tensor> attn_in, ffn_in;    // q, k, v, b, a, g [256|4, 256]; gate, up [768, 256]
  Tensor o, down;                         // [256, 256], [256, 768]
  std::vector<Tensor> attn_out, ffn_out;  // [m, 256|4], [m, 768]
  Tensor o_out, down_out;                 // [m, 256]
  std::vector<LinearGroupItem> attn_items, ffn_items;
};

// items[i] = (w[i], out[i]).
std::vector<LinearGroupItem> GroupItems(const std::vector<Tensor>& w, std::vector<Tensor>& out) {
  std::vector<LinearGroupItem> items;
  for (size_t i = 0; i < w.size(); ++i) items.push_back({.w = &w[i], .out = &out[i]});
  return items;
}

Layer MakeLayer(HostArena& arena, DType dtype, int64_t m, std::mt19937& rng) {
  Layer l;
  for (int64_t n : {kHidden, kHidden, kHidden, kHeads, kHeads, kHidden}) {
    l.attn_in.push_back(RandomWeight(arena, dtype, n, kHidden, rng));
    l.attn_out.push_back(Tensor::Zeros(DType::kF32, {m, n}, Device::kCpu).value());
  }
  for (int i = 0; i < 2; ++i) {
    l.ffn_in.push_back(RandomWeight(arena, dtype, kIntermediate, kHidden, rng));
    l.ffn_out.push_back(Tensor::Zeros(DType::kF32, {m, kIntermediate}, Device::kCpu).value());
  }
  l.o = RandomWeight(arena, dtype, kHidden, kHidden, rng);
  l.o_out = Tensor::Zeros(DType::kF32, {m, kHidden}, Device::kCpu).value();
  l.down = RandomWeight(arena, dtype, kHidden, kIntermediate, rng);
  l.down_out = Tensor::Zeros(DType::kF32, {m, kHidden}, Device::kCpu).value();
  return l;
}

// out_i = x · w_iᵀ for each item, as the engine's grouped projections run (aborts on an error).
void RunGroup(const Context& ctx, const Tensor& x, const std::vector<LinearGroupItem>& items) {
  if (!LinearGroup(ctx, {.x = &x, .items = items}).ok()) std::abort();
}

// out = x · wᵀ (aborts on an error).
void RunOne(const Context& ctx, const Tensor& x, const Tensor& w, Tensor& out) {
  if (!Linear(ctx, {.x = &x, .w = &w, .out = &out}).ok()) std::abort();
}

// Args: weights (0 F32, 1 BF16), layers, batch rows m, threads.
void BM_DecodeGemvs(benchmark::State& state) {
  const DType dtype = state.range(0) == 0 ? DType::kF32 : DType::kBF16;
  const int64_t layers = state.range(1), m = state.range(2);
  const int threads = static_cast<int>(state.range(3));
  std::mt19937 rng(7);
  HostArena arena;
  std::vector<Layer> model;
  model.reserve(layers);  // the items point into each layer's tensors: no reallocation after
  for (int64_t i = 0; i < layers; ++i) {
    Layer& l = model.emplace_back(MakeLayer(arena, dtype, m, rng));
    l.attn_items = GroupItems(l.attn_in, l.attn_out);
    l.ffn_items = GroupItems(l.ffn_in, l.ffn_out);
  }
  std::vector<float> xs(m * kIntermediate, 0.5f);
  const Tensor x = Tensor::FromHost(std::vector<float>(xs.begin(), xs.begin() + m * kHidden), {m, kHidden},
                                    Device::kCpu).value();                                // [m, 256]
  const Tensor x_ffn = Tensor::FromHost(xs, {m, kIntermediate}, Device::kCpu).value();   // [m, 768]
  const Tensor head = RandomWeight(arena, dtype, kVocab, kHidden, rng);                  // [4096, 256]
  Tensor logits = Tensor::Zeros(DType::kF32, {m, kVocab}, Device::kCpu).value();         // [m, 4096]
  int64_t weight_bytes = head.nbytes();  // what one pass reads
  for (const Layer& l : model) {
    weight_bytes += l.o.nbytes() + l.down.nbytes();
    for (const std::vector<Tensor>* group : {&l.attn_in, &l.ffn_in}) {
      for (const Tensor& w : *group) weight_bytes += w.nbytes();
    }
  }
  std::unique_ptr<cpu::ThreadPool> pool = threads > 1 ? std::make_unique<cpu::ThreadPool>(threads) : nullptr;
  Context ctx;
  ctx.pool = pool.get();
  for (auto _ : state) {
    for (Layer& l : model) {
      RunGroup(ctx, x, l.attn_items);
      RunOne(ctx, x, l.o, l.o_out);
      RunGroup(ctx, x, l.ffn_items);
      RunOne(ctx, x_ffn, l.down, l.down_out);
    }
    RunOne(ctx, x, head, logits);
  }
  state.SetBytesProcessed(state.iterations() * weight_bytes);
}
// The bench model's 9 layers (with the head, the 37.3 / 18.6 MB of F32 / BF16 weights a step reads)
// and 4 (about a thread's half of them), batch 1 and 2, 1 and 2 threads.
BENCHMARK(BM_DecodeGemvs)
    ->ArgsProduct({{0, 1}, {4, 9}, {1, 2}, {1, 2}})
    ->ArgNames({"bf16", "layers", "m", "threads"})
    ->UseRealTime()
    ->MinTime(0.3);

// `iterations` rounds of ten independent 256-bit FMA chains (ten cover the FMA latency of two pipes).
__attribute__((target("avx2,fma"))) float FmaChains(int64_t iterations) {
  __m256 acc[10];
  for (int j = 0; j < 10; ++j) acc[j] = _mm256_set1_ps(0.001f * static_cast<float>(j));
  const __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(0.0001f);
  for (int64_t i = 0; i < iterations; ++i) {
    for (__m256& v : acc) v = _mm256_fmadd_ps(v, a, b);
  }
  __m256 sum = acc[0];
  for (int j = 1; j < 10; ++j) sum = _mm256_add_ps(sum, acc[j]);
  return _mm256_cvtss_f32(sum);
}

// Args: threads, each running the chains at once. Reports 256-bit FMAs a second per thread (items).
void BM_FmaRate(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  constexpr int64_t kIterations = int64_t{1} << 22;
  for (auto _ : state) {
    std::vector<std::thread> others;
    for (int t = 1; t < threads; ++t) others.emplace_back([] { benchmark::DoNotOptimize(FmaChains(kIterations)); });
    benchmark::DoNotOptimize(FmaChains(kIterations));
    for (std::thread& t : others) t.join();
  }
  state.SetItemsProcessed(state.iterations() * kIterations * 10);
}
BENCHMARK(BM_FmaRate)->Arg(1)->Arg(2)->ArgName("threads")->UseRealTime()->MinTime(0.3);

}  // namespace
}  // namespace mcserve::kernels

BENCHMARK_MAIN();
